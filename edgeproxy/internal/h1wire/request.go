package h1wire

import (
	"bufio"
	"bytes"
)

// readHead appends a message head (start line and header lines, through the
// empty line) from br to dst. It fails with errHeadTooLarge past limit
// bytes, with the read error otherwise, unless wait (non-nil) turns that
// error into nil: then it goes on reading where it stopped (bytes already
// read are never lost; see upstream.Watch.Wait).
func ReadHead(br *bufio.Reader, dst []byte, limit int, wait func(error) error) ([]byte, error) {
	lineStart := len(dst)
	for {
		frag, err := br.ReadSlice('\n')
		dst = append(dst, frag...) // kept even when too large: a hand-off replays it
		if len(dst) > limit {
			return dst, ErrHeadTooLarge
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if wait != nil {
				if err = wait(err); err == nil {
					continue
				}
			}
			return dst, err
		}
		line := dst[lineStart:]
		if len(line) == 1 || len(line) == 2 && line[0] == '\r' {
			if lineStart > 0 {
				return dst, nil
			}
			// Empty lines before a start line are allowed (RFC 9112
			// §2.2); drop them.
			dst = dst[:0]
		}
		lineStart = len(dst)
	}
}

// h1Header is one header line of a parsed head (slices into the head).
type Header struct {
	Name, Value []byte
	Kind        int // headerKind(name), from the parse
}

// h1Request is a request head the loop serves (slices into h1Conn.head).
type Request struct {
	Method, URI, Host []byte
	Headers           []Header
	// connNames are the header names the Connection header lists; connSet
	// holds them when there are many (linear header checks).
	ConnNames [][]byte
	connSet   namedSet
	Head      bool
	Close     bool
	RequestID bool
	TETrailer bool
	// genID is the X-Request-Id the edge generated for this request (when
	// it had none), for the access log.
	GenID RequestIDBuf
}

// Header kinds the loop treats specially.
const (
	HdrOther = iota
	HdrHop
	HdrForwarded
	hdrHost
	HdrConnection
	hdrContentLength
	hdrTransferEncoding
	HdrUpgrade
	hdrExpect
	HdrRequestID
	HdrTE
	HdrTrailer
	// hdrClientClaim: a header naming the client or the scheme that the
	// edge does not set itself (clientClaimHeaders); dropped from an
	// untrusted peer.
	HdrClientClaim
	// hdrUnderscore: a name with underscores that reads as one of the
	// above with hyphens (underscoreAlias); never forwarded.
	HdrUnderscore
)

// clientClaimHeaders are headers backends commonly believe about the
// client (its address, the original scheme or port) besides the
// Forwarded / X-Forwarded-For/-Proto/-Host the edge sets: from a peer
// outside the trusted proxies they are removed, so a client cannot claim
// another address (an incoming chain is trusted only from the configured
// trusted proxy CIDRs).
var ClientClaimHeaders = []string{
	"X-Real-Ip", "X-Forwarded-Port", "X-Forwarded-Ssl", "X-Forwarded-Scheme",
	"X-Forwarded-Server", "X-Client-Ip", "True-Client-Ip", "X-Cluster-Client-Ip",
	"Cf-Connecting-Ip", "Fastly-Client-Ip",
}

// headerKind classifies a header name (case-insensitive).
func HeaderKind(name []byte) int {
	switch len(name) {
	case 2:
		if ASCIIEqualFold(name, "te") {
			return HdrTE
		}
	case 4:
		if ASCIIEqualFold(name, "host") {
			return hdrHost
		}
	case 6:
		if ASCIIEqualFold(name, "expect") {
			return hdrExpect
		}
	case 7:
		if ASCIIEqualFold(name, "upgrade") {
			return HdrUpgrade
		}
		if ASCIIEqualFold(name, "trailer") {
			return HdrTrailer
		}
	case 9:
		if ASCIIEqualFold(name, "forwarded") {
			return HdrForwarded
		}
		if ASCIIEqualFold(name, "x-real-ip") {
			return HdrClientClaim
		}
	case 11:
		if ASCIIEqualFold(name, "x-client-ip") {
			return HdrClientClaim
		}
	case 10:
		if ASCIIEqualFold(name, "connection") {
			return HdrConnection
		}
		if ASCIIEqualFold(name, "keep-alive") {
			return HdrHop
		}
	case 12:
		if ASCIIEqualFold(name, "x-request-id") {
			return HdrRequestID
		}
	case 14:
		if ASCIIEqualFold(name, "content-length") {
			return hdrContentLength
		}
		if ASCIIEqualFold(name, "true-client-ip") {
			return HdrClientClaim
		}
	case 15:
		if ASCIIEqualFold(name, "x-forwarded-for") {
			return HdrForwarded
		}
		if ASCIIEqualFold(name, "x-forwarded-ssl") {
			return HdrClientClaim
		}
	case 16:
		if ASCIIEqualFold(name, "x-forwarded-host") {
			return HdrForwarded
		}
		if ASCIIEqualFold(name, "proxy-connection") {
			return HdrHop
		}
		if ASCIIEqualFold(name, "x-forwarded-port") || ASCIIEqualFold(name, "cf-connecting-ip") ||
			ASCIIEqualFold(name, "fastly-client-ip") {
			return HdrClientClaim
		}
	case 17:
		if ASCIIEqualFold(name, "transfer-encoding") {
			return hdrTransferEncoding
		}
		if ASCIIEqualFold(name, "x-forwarded-proto") {
			return HdrForwarded
		}
	case 18:
		if ASCIIEqualFold(name, "proxy-authenticate") {
			return HdrHop
		}
		if ASCIIEqualFold(name, "x-forwarded-scheme") || ASCIIEqualFold(name, "x-forwarded-server") {
			return HdrClientClaim
		}
	case 19:
		if ASCIIEqualFold(name, "proxy-authorization") {
			return HdrHop
		}
		if ASCIIEqualFold(name, "x-cluster-client-ip") {
			return HdrClientClaim
		}
	}
	return HdrOther
}

// asciiEqualFold compares b with the lowercase ASCII string s.
func ASCIIEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// parseRequest parses head into req and reports whether the loop serves it
// (see the comment at the top of internal/dataplane/h1_conn.go); false hands the request to
// net/http.
func ParseRequest(head []byte, req *Request) bool {
	*req = Request{Headers: req.Headers[:0], ConnNames: req.ConnNames[:0]}
	line, rest, ok := cutLine(head)
	if !ok {
		return false
	}
	switch {
	case bytes.HasPrefix(line, []byte("GET ")):
		req.Method, line = line[:3], line[4:]
	case bytes.HasPrefix(line, []byte("HEAD ")):
		req.Method, line = line[:4], line[5:]
		req.Head = true
	default:
		return false
	}
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || string(line[sp+1:]) != "HTTP/1.1" {
		return false
	}
	req.URI = line[:sp]
	if !validRequestURI(req.URI) || bytes.HasPrefix(req.URI, acmeChallengePath) {
		return false // ACME HTTP-01: ServeHTTP answers it before routing
	}
	hosts := 0
	for {
		line, rest, ok = cutLine(rest)
		if !ok {
			return false
		}
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !validToken(line[:colon]) {
			return false // includes obsolete line folding (leading space)
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		if !ValidFieldValue(value) {
			return false
		}
		kind := HeaderKind(name)
		if kind == HdrOther && UnderscoreAlias(name) {
			kind = HdrUnderscore
		}
		switch kind {
		case hdrHost:
			hosts++
			req.Host = value
			continue // written first, from req.host
		case hdrContentLength:
			if string(value) != "0" {
				return false
			}
			continue // a bodiless request needs none
		case hdrTransferEncoding, HdrUpgrade, hdrExpect:
			return false
		case HdrConnection:
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = bytes.Trim(tok, " \t")
				switch {
				case ASCIIEqualFold(tok, "close"):
					req.Close = true
				case ASCIIEqualFold(tok, "keep-alive"), len(tok) == 0:
				default:
					req.ConnNames = append(req.ConnNames, tok)
				}
			}
		case HdrRequestID:
			if len(value) == 0 {
				continue // no id: one is added
			}
			req.RequestID = true
		case HdrTE:
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				if ASCIIEqualFold(bytes.Trim(tok, " \t"), "trailers") {
					req.TETrailer = true
				}
			}
		}
		req.Headers = append(req.Headers, Header{Name: name, Value: value, Kind: kind})
	}
	req.connSet = newNamedSet(req.ConnNames)
	if req.RequestID && req.NamedByConnection([]byte("X-Request-Id")) {
		req.RequestID = false // dropped as hop-by-hop: one is added
	}
	return hosts == 1 && len(req.Host) > 0 && validHost(req.Host)
}

// cutLine splits off a CRLF-terminated line (bare LF: not for the loop).
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 1 || b[i-1] != '\r' {
		return nil, nil, false
	}
	return b[:i-1], b[i+1:], true
}

// tokenTable marks RFC 9110 tchar bytes.
var tokenTable = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func validToken(b []byte) bool {
	for _, c := range b {
		if !tokenTable[c] {
			return false
		}
	}
	return len(b) > 0
}

// validFieldValue rejects control characters other than HTAB (as
// net/http's httpguts.ValidHeaderFieldValue).
func ValidFieldValue(b []byte) bool {
	for _, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// validRequestURI accepts an origin-form target with no control
// characters, spaces or broken percent escapes.
func validRequestURI(b []byte) bool {
	if len(b) == 0 || b[0] != '/' {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c <= ' ' || c == 0x7f {
			return false
		}
		if c == '%' && (i+2 >= len(b) || !ishex(b[i+1]) || !ishex(b[i+2])) {
			return false
		}
	}
	return true
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validHost accepts the bytes net/http accepts in a Host header
// (httpguts.ValidHostHeader), minus the rare ones (which go to net/http).
func validHost(b []byte) bool {
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == ':', c == '[', c == ']', c == '_':
		default:
			return false
		}
	}
	return true
}
