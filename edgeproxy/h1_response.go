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

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

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
func readResponse(fc *fastConn, resp *h1wire.Response, headReq bool, buf []byte, wait func(error) error) error {
	informational := 0 // bytes of 1xx heads: they count toward h1MaxResponseHead
	for {
		if _, err := fc.br.Peek(1); err != nil {
			if err = wait(err); err != nil {
				return err
			}
			continue
		}
		resp.Started = true
		head, err := h1wire.ReadHead(fc.br, buf[:0], h1MaxResponseHead-informational, wait)
		resp.Head = head
		if err != nil {
			if errors.Is(err, h1wire.ErrHeadTooLarge) {
				return h1wire.ErrBadResponse
			}
			return err
		}
		if err := h1wire.ParseResponse(head, resp, headReq); err != nil {
			return err
		}
		if resp.Code == http.StatusSwitchingProtocols {
			return errors.New("backend switched protocols without an upgrade request")
		}
		if resp.Code >= 200 {
			return nil
		}
		informational += len(head)
		buf = head // 1xx: the final response follows
	}
}

// relayResponse writes resp and its body from fc to the client (the last
// bytes may stay buffered: serveH1 flushes). ok is false
// when the client connection must close (it failed, or the body could not
// be relayed whole); upstreamOK is false when fc cannot be reused.
func relayResponse(hc *h1Conn, fc *fastConn, resp *h1wire.Response, keep bool, pool interface {
	Get() []byte
	Put([]byte)
}, hsts string) (ok, upstreamOK bool) {
	writeResponseHead(hc.bw, resp, keep, hsts)
	hc.markBody()
	switch {
	case resp.NoBody:
		return true, true
	case resp.Chunked:
		return relayChunked(hc, fc)
	case resp.UntilClose:
		return relayUntilClose(hc, fc, pool), false
	default:
		return relayLength(hc, fc, resp.Length, pool)
	}
}

// writeResponseHead writes the head of resp as relayed to the client:
// hop-by-hop headers dropped, the body framing rewritten, "Connection:
// close" unless keep; a Strict-Transport-Security field of value hsts in
// place of the backend's ("": the backend's as it is).
func writeResponseHead(bw *bufio.Writer, resp *h1wire.Response, keep bool, hsts string) {
	bw.WriteString("HTTP/1.1 ")
	bw.Write(resp.Status)
	bw.WriteString("\r\n")
	for _, h := range resp.Headers {
		k := h.Kind
		if k == h1wire.HdrHop || k == h1wire.HdrUpgrade || k == h1wire.HdrTE || k == h1wire.HdrTrailer && !resp.Chunked || resp.NamedByConnection(h.Name) ||
			hsts != "" && h1wire.IsHSTS(h.Name) {
			continue
		}
		bw.Write(h.Name)
		bw.WriteString(": ")
		bw.Write(h.Value)
		bw.WriteString("\r\n")
	}
	switch {
	case resp.Length >= 0 && !resp.UntilClose && resp.Code != http.StatusNoContent:
		// (RFC 9110 §8.6: no Content-Length in a 204.)
		bw.WriteString("Content-Length: ")
		writeInt(bw, resp.Length, 10)
		bw.WriteString("\r\n")
	case resp.Chunked && !resp.NoBody, resp.UntilClose:
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
				if err != nil || len(line) > 0 && !h1wire.ValidTrailer(line) {
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
	n, ok = h1wire.ParseChunkSize(bytes.TrimRight(size, " \t"))
	if !ok || !h1wire.ValidFieldValue(line) {
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
			return nil, h1wire.ErrBadResponse
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
