package edgeproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// h1Response is a backend response head (slices into its head buffer).
type h1Response struct {
	head    []byte
	status  []byte // "200 OK"
	code    int
	headers []h1Header
	// Body framing.
	noBody     bool
	chunked    bool
	untilClose bool
	length     int64
	close      bool
	connNames  [][]byte
	connSet    namedSet
	started    bool // a response byte arrived
	http10     bool
}

// upstreamTick is how long the loop waits on a backend before it checks
// that the client is still connected (net/http notices at once through a
// background read per request; this costs nothing per request).
const upstreamTick = time.Second

// statusClientClosed is recorded in the metrics for a request whose
// client went away before its answer (nginx's 499).
const statusClientClosed = 499

// errClientGone ends an exchange whose client closed its connection.
var errClientGone = errors.New("client closed the connection")

// upstreamWatch bounds the reads of one backend exchange (the h1 loop's
// and the HTTP/2 fast path's): the route's response header deadline, and
// a client check every upstreamTick (gone reports a client that left).
type upstreamWatch struct {
	up         *fastConn
	rhDeadline time.Time
	gone       func() bool
}

// armUpstream sets fc's read deadline for an exchange: the route's response
// header deadline or the next client check, whichever is first. For a
// timeout over 2 s the deadline is moved only when it is near, so most
// requests do not touch it.
func (w *upstreamWatch) armUpstream(fc *fastConn, responseHeader time.Duration) {
	w.up = fc
	now := time.Now()
	w.rhDeadline = time.Time{}
	if responseHeader > 0 {
		w.rhDeadline = now.Add(responseHeader)
		if responseHeader <= 2*upstreamTick {
			// Short: its own deadline. A longer one (the 60 s default) is
			// checked at the client checks, at most upstreamTick late, so
			// it costs no deadline update per request either.
			fc.setWatch(earliest(now.Add(upstreamTick), w.rhDeadline))
			return
		}
	}
	if fc.watchUntil.Sub(now) < upstreamTick/2 {
		fc.setWatch(now.Add(upstreamTick))
	}
}

// headDone lifts the route's response header deadline once the head came
// (a deadline armed for it only makes upstreamWait check the client and
// re-arm the next check).
func (w *upstreamWatch) headDone() {
	w.rhDeadline = time.Time{}
}

// upstreamWait judges an error from reading the backend: a deadline that
// is only a client check returns nil (read on) while the client is still
// there, errClientGone when it is not; the route's response header
// deadline returns errResponseHeaderTimeout (504); any other error is
// returned as is.
func (w *upstreamWatch) upstreamWait(err error) error {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	now := time.Now()
	if !w.rhDeadline.IsZero() && !now.Before(w.rhDeadline) {
		return errResponseHeaderTimeout
	}
	if w.gone() {
		return errClientGone
	}
	next := now.Add(upstreamTick)
	if !w.rhDeadline.IsZero() {
		next = earliest(next, w.rhDeadline)
	}
	w.up.setWatch(next)
	return nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// readResponse reads the final response head from fc into buf (reused;
// 1xx informational responses are skipped, their heads counting toward
// h1MaxResponseHead: errBadResponse beyond) and works out its body framing
// (RFC 9112 §6.3). Read errors go through wait (upstreamWait).
func readResponse(fc *fastConn, resp *h1Response, headReq bool, buf []byte, wait func(error) error) error {
	informational := 0 // bytes of 1xx heads: they count toward h1MaxResponseHead
	for {
		if _, err := fc.br.Peek(1); err != nil {
			if err = wait(err); err != nil {
				return err
			}
			continue
		}
		resp.started = true
		head, err := readHead(fc.br, buf[:0], h1MaxResponseHead-informational, wait)
		resp.head = head
		if err != nil {
			if errors.Is(err, errHeadTooLarge) {
				return errBadResponse
			}
			return err
		}
		if err := parseResponse(head, resp, headReq); err != nil {
			return err
		}
		if resp.code == http.StatusSwitchingProtocols {
			return errors.New("backend switched protocols without an upgrade request")
		}
		if resp.code >= 200 {
			return nil
		}
		informational += len(head)
		buf = head // 1xx: the final response follows
	}
}

// parseResponse parses a response head into resp.
func parseResponse(head []byte, resp *h1Response, headReq bool) error {
	*resp = h1Response{head: head, headers: resp.headers[:0], connNames: resp.connNames[:0], started: true, length: -1}
	line, rest, ok := cutLineLax(head)
	if !ok || len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[7] < '0' || line[7] > '9' || line[8] != ' ' {
		return errBadResponse
	}
	resp.http10 = line[7] == '0'
	resp.status = line[9:]
	if !validFieldValue(resp.status) {
		return errBadResponse
	}
	code, err := parseDecimal(line[9:12])
	if err != nil || code < 100 || code > 999 || len(line) > 12 && line[12] != ' ' {
		return errBadResponse
	}
	resp.code = code
	keepAlive10 := false
	for {
		line, rest, ok = cutLineLax(rest)
		if !ok {
			return errBadResponse
		}
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !validToken(line[:colon]) {
			return errBadResponse
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		if !validFieldValue(value) {
			return errBadResponse // never relay a CR or NUL to the client
		}
		kind := headerKind(name)
		switch kind {
		case hdrContentLength:
			n64, err := parseDecimal(value)
			n := int64(n64)
			if err != nil || resp.length >= 0 && resp.length != n {
				return errBadResponse
			}
			resp.length = n
			continue // rewritten by relayResponse
		case hdrTransferEncoding:
			last := value
			if i := bytes.LastIndexByte(value, ','); i >= 0 {
				last = bytes.Trim(value[i+1:], " \t")
			}
			if !asciiEqualFold(last, "chunked") || bytes.IndexByte(value, ',') >= 0 {
				return errBadResponse // only plain chunked is relayed
			}
			resp.chunked = true
			continue
		case hdrConnection:
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = bytes.Trim(tok, " \t")
				switch {
				case asciiEqualFold(tok, "close"):
					resp.close = true
				case asciiEqualFold(tok, "keep-alive"):
					keepAlive10 = true
				case len(tok) > 0:
					resp.connNames = append(resp.connNames, tok)
				}
			}
			continue
		}
		resp.headers = append(resp.headers, h1Header{name: name, value: value, kind: kind})
	}
	resp.connSet = newNamedSet(resp.connNames)
	if resp.http10 && !keepAlive10 {
		resp.close = true
	}
	switch {
	case headReq, code < 200, code == http.StatusNoContent, code == http.StatusNotModified:
		resp.noBody = true
	case resp.chunked:
		resp.length = -1
	case resp.length >= 0:
	default:
		resp.untilClose = true
		resp.close = true
	}
	return nil
}

// parseDecimal parses a non-negative decimal of at most 18 digits without
// allocating.
func parseDecimal(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 18 {
		return 0, errBadResponse
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errBadResponse
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

// relayResponse writes resp and its body from fc to the client (the last
// bytes may stay buffered: serveH1 flushes). ok is false
// when the client connection must close (it failed, or the body could not
// be relayed whole); upstreamOK is false when fc cannot be reused.
func relayResponse(hc *h1Conn, fc *fastConn, resp *h1Response, keep bool, pool interface {
	Get() []byte
	Put([]byte)
}, hsts string) (ok, upstreamOK bool) {
	writeResponseHead(hc.bw, resp, keep, hsts)
	hc.markBody()
	switch {
	case resp.noBody:
		return true, true
	case resp.chunked:
		return relayChunked(hc, fc)
	case resp.untilClose:
		return relayUntilClose(hc, fc, pool), false
	default:
		return relayLength(hc, fc, resp.length, pool)
	}
}

// writeResponseHead writes the head of resp as relayed to the client:
// hop-by-hop headers dropped, the body framing rewritten, "Connection:
// close" unless keep; a Strict-Transport-Security field of value hsts in
// place of the backend's ("": the backend's as it is).
func writeResponseHead(bw *bufio.Writer, resp *h1Response, keep bool, hsts string) {
	bw.WriteString("HTTP/1.1 ")
	bw.Write(resp.status)
	bw.WriteString("\r\n")
	for _, h := range resp.headers {
		k := h.kind
		if k == hdrHop || k == hdrUpgrade || k == hdrTE || k == hdrTrailer && !resp.chunked || resp.namedByConnection(h.name) ||
			hsts != "" && isHSTS(h.name) {
			continue
		}
		bw.Write(h.name)
		bw.WriteString(": ")
		bw.Write(h.value)
		bw.WriteString("\r\n")
	}
	switch {
	case resp.length >= 0 && !resp.untilClose && resp.code != http.StatusNoContent:
		// (RFC 9110 §8.6: no Content-Length in a 204.)
		bw.WriteString("Content-Length: ")
		writeInt(bw, resp.length, 10)
		bw.WriteString("\r\n")
	case resp.chunked && !resp.noBody, resp.untilClose:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if hsts != "" {
		bw.WriteString("Strict-Transport-Security: ")
		bw.WriteString(hsts)
		bw.WriteString("\r\n")
	}
	if !keep {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
}

// isHSTS reports whether a header name is Strict-Transport-Security.
func isHSTS[T string | []byte](name T) bool {
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

func (r *h1Response) namedByConnection(name []byte) bool {
	return namedBy(r.connNames, r.connSet, name)
}

// flushIdle flushes the client writer unless more pipelined requests are
// already buffered (their responses then go out together).
func flushIdle(hc *h1Conn) bool {
	if hc.br.Buffered() > 0 {
		return true
	}
	return hc.bw.Flush() == nil
}

// relayLength copies a Content-Length body, flushing to the client
// whenever the backend has nothing more buffered (long downloads stream).
func relayLength(hc *h1Conn, fc *fastConn, n int64, pool interface {
	Get() []byte
	Put([]byte)
}) (ok, upstreamOK bool) {
	bw := hc.bw
	if n <= int64(fc.br.Buffered()) {
		b, _ := fc.br.Peek(int(n))
		bw.Write(b)
		_, _ = fc.br.Discard(int(n))
		return true, true
	}
	buf := pool.Get()
	defer pool.Put(buf)
	for n > 0 {
		if fc.br.Buffered() == 0 {
			if bw.Flush() != nil {
				return false, false
			}
		}
		m, err := fc.br.Read(buf[:min(int64(len(buf)), n)])
		if m > 0 {
			n -= int64(m)
			if _, werr := bw.Write(buf[:m]); werr != nil {
				return false, false
			}
		}
		if err != nil && n > 0 && hc.wait(err) != nil {
			return false, false // truncated: the client must not take it as whole
		}
	}
	return true, true
}

// relayChunked passes a chunked body through chunk by chunk, trailers
// included, flushing whenever the backend has nothing more buffered (so
// server-sent events pass as sent).
func relayChunked(hc *h1Conn, fc *fastConn) (ok, upstreamOK bool) {
	bw := hc.bw
	for {
		if fc.br.Buffered() == 0 && bw.Flush() != nil {
			return false, false
		}
		line, n, ok := readChunkSize(fc, hc.wait)
		if !ok {
			return false, false // cut: the client sees an incomplete body
		}
		bw.Write(line)
		bw.WriteString("\r\n")
		if n == 0 {
			// Trailer section, through the empty line.
			for {
				line, err := hc.upstreamLine(fc)
				if err != nil || len(line) > 0 && !validTrailer(line) {
					return false, false
				}
				bw.Write(line)
				bw.WriteString("\r\n")
				if len(line) == 0 {
					return true, true
				}
			}
		}
		for n > 0 {
			if fc.br.Buffered() == 0 && bw.Flush() != nil {
				return false, false
			}
			// Relay what is buffered (at least one byte) of this chunk.
			if _, err := fc.br.Peek(1); err != nil {
				if hc.wait(err) != nil {
					return false, false
				}
				continue
			}
			b, _ := fc.br.Peek(int(min(n, int64(fc.br.Buffered()))))
			if _, werr := bw.Write(b); werr != nil {
				return false, false
			}
			_, _ = fc.br.Discard(len(b))
			n -= int64(len(b))
		}
		crlf, err := hc.upstreamLine(fc)
		if err != nil || len(crlf) != 0 {
			return false, false
		}
		bw.WriteString("\r\n")
	}
}

// readChunkSize reads a chunk-size line from fc (extensions kept in line,
// valid until the next read) and parses its size; ok is false for a
// malformed line or a failed read.
func readChunkSize(fc *fastConn, wait func(error) error) (line []byte, n int64, ok bool) {
	line, err := upstreamLine(fc, wait)
	if err != nil {
		return nil, 0, false
	}
	size := line
	if i := bytes.IndexByte(size, ';'); i >= 0 {
		size = size[:i]
	}
	n, ok = parseChunkSize(bytes.TrimRight(size, " \t"))
	if !ok || !validFieldValue(line) {
		return nil, 0, false
	}
	return line, n, true
}

// writeInt writes n in base without allocating (formatted into the
// writer's own buffer).
func writeInt(bw *bufio.Writer, n int64, base int) {
	if bw.Available() < 24 {
		_ = bw.Flush()
	}
	_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), n, base))
}

// parseChunkSize parses a chunk size: 1-15 hex digits, nothing else (no
// sign, no 0x: strconv would accept "+5" and "-0").
func parseChunkSize(b []byte) (int64, bool) {
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
func validTrailer(line []byte) bool {
	colon := bytes.IndexByte(line, ':')
	return colon > 0 && validToken(line[:colon]) && validFieldValue(line[colon+1:])
}

// upstreamLine reads one line of a chunked body from fc (CRLF or LF
// stripped; at most the reader's 4 KiB), waiting through upstreamWait
// without losing a partial line. The line is valid until the next read.
func (hc *h1Conn) upstreamLine(fc *fastConn) ([]byte, error) {
	return upstreamLine(fc, hc.wait)
}

// upstreamLine reads one line of a chunked body from fc as the method
// does, read errors going through wait.
func upstreamLine(fc *fastConn, wait func(error) error) ([]byte, error) {
	for {
		buf, _ := fc.br.Peek(fc.br.Buffered())
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			_, _ = fc.br.Discard(i + 1)
			line := buf[:i]
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
			}
			return line, nil
		}
		if len(buf) == fc.br.Size() {
			return nil, errBadResponse
		}
		if _, err := fc.br.Peek(len(buf) + 1); err != nil {
			if err = wait(err); err != nil {
				return nil, err
			}
		}
	}
}

// relayUntilClose re-chunks a body delimited by the backend closing,
// flushing every read; the backend connection is not reusable.
func relayUntilClose(hc *h1Conn, fc *fastConn, pool interface {
	Get() []byte
	Put([]byte)
}) bool {
	bw := hc.bw
	buf := pool.Get()
	defer pool.Put(buf)
	for {
		n, err := fc.br.Read(buf)
		if n > 0 {
			writeInt(bw, int64(n), 16)
			bw.WriteString("\r\n")
			bw.Write(buf[:n])
			bw.WriteString("\r\n")
			if bw.Flush() != nil {
				return false
			}
		}
		if errors.Is(err, io.EOF) {
			bw.WriteString("0\r\n\r\n")
			return true
		}
		if err != nil && hc.wait(err) != nil {
			return false
		}
	}
}
