package h1wire

import (
	"bytes"
	"net/http"
)

// h1Response is a backend response head (slices into its head buffer).
type Response struct {
	Head    []byte
	Status  []byte // "200 OK"
	Code    int
	Headers []Header
	// Body framing.
	NoBody     bool
	Chunked    bool
	UntilClose bool
	Length     int64
	Close      bool
	ConnNames  [][]byte
	connSet    namedSet
	Started    bool // a response byte arrived
	http10     bool
}

// parseResponse parses a response head into resp.
func ParseResponse(head []byte, resp *Response, headReq bool) error {
	*resp = Response{Head: head, Headers: resp.Headers[:0], ConnNames: resp.ConnNames[:0], Started: true, Length: -1}
	line, rest, ok := cutLineLax(head)
	if !ok || len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[7] < '0' || line[7] > '9' || line[8] != ' ' {
		return ErrBadResponse
	}
	resp.http10 = line[7] == '0'
	resp.Status = line[9:]
	if !ValidFieldValue(resp.Status) {
		return ErrBadResponse
	}
	code, err := ParseDecimal(line[9:12])
	if err != nil || code < 100 || code > 999 || len(line) > 12 && line[12] != ' ' {
		return ErrBadResponse
	}
	resp.Code = code
	keepAlive10 := false
	for {
		line, rest, ok = cutLineLax(rest)
		if !ok {
			return ErrBadResponse
		}
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !validToken(line[:colon]) {
			return ErrBadResponse
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		if !ValidFieldValue(value) {
			return ErrBadResponse // never relay a CR or NUL to the client
		}
		kind := HeaderKind(name)
		switch kind {
		case hdrContentLength:
			n64, err := ParseDecimal(value)
			n := int64(n64)
			if err != nil || resp.Length >= 0 && resp.Length != n {
				return ErrBadResponse
			}
			resp.Length = n
			continue // rewritten by relayResponse
		case hdrTransferEncoding:
			last := value
			if i := bytes.LastIndexByte(value, ','); i >= 0 {
				last = bytes.Trim(value[i+1:], " \t")
			}
			if !ASCIIEqualFold(last, "chunked") || bytes.IndexByte(value, ',') >= 0 {
				return ErrBadResponse // only plain chunked is relayed
			}
			resp.Chunked = true
			continue
		case HdrConnection:
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = bytes.Trim(tok, " \t")
				switch {
				case ASCIIEqualFold(tok, "close"):
					resp.Close = true
				case ASCIIEqualFold(tok, "keep-alive"):
					keepAlive10 = true
				case len(tok) > 0:
					resp.ConnNames = append(resp.ConnNames, tok)
				}
			}
			continue
		}
		resp.Headers = append(resp.Headers, Header{Name: name, Value: value, Kind: kind})
	}
	resp.connSet = newNamedSet(resp.ConnNames)
	if resp.http10 && !keepAlive10 {
		resp.Close = true
	}
	switch {
	case headReq, code < 200, code == http.StatusNoContent, code == http.StatusNotModified:
		resp.NoBody = true
	case resp.Chunked:
		resp.Length = -1
	case resp.Length >= 0:
	default:
		resp.UntilClose = true
		resp.Close = true
	}
	return nil
}

// parseDecimal parses a non-negative decimal of at most 18 digits without
// allocating.
func ParseDecimal(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 18 {
		return 0, ErrBadResponse
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, ErrBadResponse
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// cutLineLax splits off a line ending in CRLF or a bare LF (backends).
func cutLineLax(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, nil, false
	}
	line = b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, b[i+1:], true
}

// isHSTS reports whether a header name is Strict-Transport-Security.
func IsHSTS[T string | []byte](name T) bool {
	const sts = "strict-transport-security"
	if len(name) != len(sts) {
		return false
	}
	for i := range len(sts) {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != sts[i] {
			return false
		}
	}
	return true
}

func (r *Response) NamedByConnection(name []byte) bool {
	return namedBy(r.ConnNames, r.connSet, name)
}

// parseChunkSize parses a chunk size: 1-15 hex digits, nothing else (no
// sign, no 0x: strconv would accept "+5" and "-0").
func ParseChunkSize(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | int64(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | int64(c-'a'+10)
		case 'A' <= c && c <= 'F':
			n = n<<4 | int64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// validTrailer accepts a trailer field line "name: value".
func ValidTrailer(line []byte) bool {
	colon := bytes.IndexByte(line, ':')
	return colon > 0 && validToken(line[:colon]) && ValidFieldValue(line[colon+1:])
}
