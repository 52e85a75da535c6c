package dataplane

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// StatusClientClosed is recorded in the metrics for a request whose
// client went away before its answer (nginx's 499).
const StatusClientClosed = 499

// relayResponse writes resp and its body from fc to the client (the last
// bytes may stay buffered: serveH1 flushes). ok is false
// when the client connection must close (it failed, or the body could not
// be relayed whole); upstreamOK is false when fc cannot be reused.
func relayResponse(hc *H1Conn, fc *upstream.Conn, resp *h1wire.Response, keep bool, pool interface {
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
func flushIdle(hc *H1Conn) bool {
	if hc.br.Buffered() > 0 {
		return true
	}
	return hc.bw.Flush() == nil
}

// relayLength copies a Content-Length body, flushing to the client
// whenever the backend has nothing more buffered (long downloads stream).
func relayLength(hc *H1Conn, fc *upstream.Conn, n int64, pool interface {
	Get() []byte
	Put([]byte)
}) (ok, upstreamOK bool) {
	bw := hc.bw
	if n <= int64(fc.R.Buffered()) {
		b, _ := fc.R.Peek(int(n))
		bw.Write(b)
		_, _ = fc.R.Discard(int(n))
		return true, true
	}
	buf := pool.Get()
	defer pool.Put(buf)
	for n > 0 {
		if fc.R.Buffered() == 0 {
			if bw.Flush() != nil {
				return false, false
			}
		}
		m, err := fc.R.Read(buf[:min(int64(len(buf)), n)])
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
func relayChunked(hc *H1Conn, fc *upstream.Conn) (ok, upstreamOK bool) {
	bw := hc.bw
	for {
		if fc.R.Buffered() == 0 && bw.Flush() != nil {
			return false, false
		}
		line, n, ok := upstream.ReadChunkSize(fc, hc.wait)
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
			if fc.R.Buffered() == 0 && bw.Flush() != nil {
				return false, false
			}
			// Relay what is buffered (at least one byte) of this chunk.
			if _, err := fc.R.Peek(1); err != nil {
				if hc.wait(err) != nil {
					return false, false
				}
				continue
			}
			b, _ := fc.R.Peek(int(min(n, int64(fc.R.Buffered()))))
			if _, werr := bw.Write(b); werr != nil {
				return false, false
			}
			_, _ = fc.R.Discard(len(b))
			n -= int64(len(b))
		}
		crlf, err := hc.upstreamLine(fc)
		if err != nil || len(crlf) != 0 {
			return false, false
		}
		bw.WriteString("\r\n")
	}
}

// writeInt writes n in base without allocating (formatted into the
// writer's own buffer).
func writeInt(bw *bufio.Writer, n int64, base int) {
	if bw.Available() < 24 {
		_ = bw.Flush()
	}
	_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), n, base))
}

// upstreamLine reads one line of a chunked body from fc
// (upstream.ReadLine), waiting through the connection's Watch.
func (hc *H1Conn) upstreamLine(fc *upstream.Conn) ([]byte, error) {
	return upstream.ReadLine(fc, hc.wait)
}

// relayUntilClose re-chunks a body delimited by the backend closing,
// flushing every read; the backend connection is not reusable.
func relayUntilClose(hc *H1Conn, fc *upstream.Conn, pool interface {
	Get() []byte
	Put([]byte)
}) bool {
	bw := hc.bw
	buf := pool.Get()
	defer pool.Put(buf)
	for {
		n, err := fc.R.Read(buf)
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
