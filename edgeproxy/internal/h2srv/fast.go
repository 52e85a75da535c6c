package h2srv

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// The HTTP/2 fast path, the stream's side: a GET or HEAD without a body,
// from a peer that is not a trusted proxy, may be served by the edge
// without an http.Request (Handler.ServeFast), which relays a backend's
// HTTP/1.1 answer as HEADERS and DATA frames as it comes. Everything else
// takes Handler.ServeHTTP (stream.go).
//
// The stream offers a candidate (h2FastCandidate) to Handler.ServeFast;
// the edge routes it, exchanges it with a backend (its h2_fast.go) and
// writes the answer with the Write methods below.

// MaxFrameSize is the largest DATA payload the server sends in a frame: a
// sized answer at most that long, already read whole, goes out as one
// HEADERS and one DATA frame (WriteSmall).
const MaxFrameSize = h2MaxFrameSize

// serveFast offers f to the handler's fast path when it qualifies; false
// leaves it to ServeHTTP.
func (st *Stream) serveFast(f *http2.MetaHeadersFrame) bool {
	method, path, authority, ok := st.h2FastCandidate(f)
	if !ok {
		return false
	}
	st.bodyOut = 0
	return st.c.cfg.Handler.ServeFast(st, method, path, authority, f.RegularFields())
}

// h2FastCandidate reports whether f may take the fast path (before the
// route is known); method, path and authority are its pseudo-headers.
func (st *Stream) h2FastCandidate(f *http2.MetaHeadersFrame) (method, path, authority string, ok bool) {
	if !f.StreamEnded() || f.Truncated || st.oversized || st.c.cfg.Trusted {
		return "", "", "", false
	}
	method = f.PseudoValue("method")
	if method != http.MethodGet && method != http.MethodHead {
		return "", "", "", false
	}
	path, authority = f.PseudoValue("path"), f.PseudoValue("authority")
	if f.PseudoValue("scheme") == "" || !validOriginPath(path) || !validAuthority(authority) {
		return "", "", "", false
	}
	for _, hf := range f.RegularFields() {
		switch {
		case h2ConnHeaders[hf.Name], hf.Name == "te" && hf.Value != "trailers",
			hf.Name == "host", hf.Name == "expect", hf.Name == "content-length":
			return "", "", "", false
		}
	}
	return method, path, authority, true
}

// validOriginPath accepts an origin-form request target with no byte a
// request line cannot carry.
func validOriginPath(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// validAuthority accepts a host[:port] of the characters host names and
// IP literals use.
func validAuthority(a string) bool {
	if a == "" {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '-', c == ':', c == '[', c == ']', c == '_':
		default:
			return false
		}
	}
	return true
}

// IsReset reports whether the stream was reset (by the client, or with
// its connection).
func (st *Stream) IsReset() bool {
	st.c.wmu.Lock()
	defer st.c.wmu.Unlock()
	return st.reset
}

// Context is the connection's: canceled when it closes (a reset stream
// shows in IsReset).
func (st *Stream) Context() context.Context { return st.c.ctx }

// Scratch is the worker's reusable buffers: the backend answer's head,
// its parsed form and a small answer's body.
func (st *Stream) Scratch() *Scratch { return st.scratch }

// SetHSTS sets the route's Strict-Transport-Security value: WriteHead
// sends it in place of the backend's.
func (st *Stream) SetHSTS(v string) { st.hsts = v }

// BodyOut is the DATA payload bytes written (the access log's bytes_out).
func (st *Stream) BodyOut() int64 { return st.bodyOut }

// HoldBackend notes that the stream relays from a backend connection it
// holds: its waits for window take a stall place (h2MaxStalled).
func (st *Stream) HoldBackend() {
	st.c.wmu.Lock()
	st.holdsBackend = true
	st.c.wmu.Unlock()
}

// Reset resets the stream (INTERNAL_ERROR): its answer could not be
// relayed whole.
func (st *Stream) Reset() {
	st.c.wmu.Lock()
	st.resetLocked(http2.ErrCodeInternal, true)
	st.c.wmu.Unlock()
}

// WriteHead queues resp's head as HEADERS (END_STREAM when end) and has
// it sent.
func (st *Stream) WriteHead(resp *h1wire.Response, end bool) error {
	c := st.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := st.writeRespHeadLocked(resp, end)
	c.kickLocked()
	return err
}

// WriteData queues p as DATA frames (END_STREAM on the last when end);
// flush has them sent now (the backend has nothing more buffered).
func (st *Stream) WriteData(p []byte, end, flush bool) error {
	c := st.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := st.writeDataLocked(p, end)
	if flush {
		c.kickLocked()
	}
	return err
}

// WriteSmall queues resp's head and its whole body: HEADERS and DATA
// with END_STREAM, together.
func (st *Stream) WriteSmall(resp *h1wire.Response, body []byte) bool {
	c := st.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := st.writeRespHeadLocked(resp, len(body) == 0)
	if err == nil && len(body) > 0 {
		err = st.writeDataLocked(body, true)
	}
	c.kickLocked()
	return err == nil
}

// WritePage queues an answer of the edge's own: HEADERS of code and
// fields, then body (none when head), ending the stream.
func (st *Stream) WritePage(code int, fields []hpack.HeaderField, body []byte, head bool) {
	c := st.c
	c.wmu.Lock()
	werr := st.writeFieldsLocked(code, fields, head)
	if werr == nil && !head {
		_ = st.writeDataLocked(body, true)
	}
	c.kickLocked()
	c.wmu.Unlock()
}

// End ends the answer: trailers with END_STREAM, or an empty DATA frame
// with it.
func (st *Stream) End(trailers []hpack.HeaderField) bool {
	c := st.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var err error
	if len(trailers) > 0 {
		err = st.writeFieldsLocked(0, trailers, true)
	} else {
		err = st.writeDataLocked(nil, true)
	}
	c.kickLocked()
	return err == nil
}

// writeRespHeadLocked queues resp's head as HEADERS (writeResponseHead's
// field rules; Content-Length kept for a sized body).
func (st *Stream) writeRespHeadLocked(resp *h1wire.Response, end bool) error {
	c := st.c
	// Room first: the wait lets other streams run, and they use
	// c.fieldBuf too.
	if err := st.waitRoomLocked(); err != nil {
		return err
	}
	fields := c.fieldBuf[:0]
	for _, h := range resp.Headers {
		k := h.Kind
		if k == h1wire.HdrHop || k == h1wire.HdrUpgrade || k == h1wire.HdrTE || k == h1wire.HdrTrailer && !resp.Chunked || resp.NamedByConnection(h.Name) ||
			st.hsts != "" && h1wire.IsHSTS(h.Name) {
			continue
		}
		fields = append(fields, hpack.HeaderField{Name: lowerName(c, h.Name), Value: string(h.Value)})
	}
	if st.hsts != "" {
		fields = append(fields, hpack.HeaderField{Name: "strict-transport-security", Value: st.hsts})
	}
	if resp.Length >= 0 && !resp.UntilClose && resp.Code != http.StatusNoContent {
		fields = append(fields, hpack.HeaderField{Name: "content-length", Value: strconv.FormatInt(resp.Length, 10)})
	}
	c.fieldBuf = fields[:0]
	return st.writeFieldsLocked(resp.Code, fields, end)
}

// writeFieldsLocked queues a HEADERS block of fields (with :status when
// code is not 0) and its CONTINUATIONs.
func (st *Stream) writeFieldsLocked(code int, fields []hpack.HeaderField, end bool) error {
	c := st.c
	if err := st.beginBlockLocked(code); err != nil {
		return err
	}
	for _, f := range fields {
		_ = c.henc.WriteField(f)
	}
	st.writeBlockLocked(end)
	return nil
}

// lowerName is name lower-cased as a string, interned per connection for
// the names it has seen (at most h2MaxInterned); under c.wmu. Both
// paths use it: the fast path with the backend's bytes, ServeHTTP's
// writer with canonical header keys.
func lowerName[T string | []byte](c *Conn, name T) string {
	var buf [64]byte
	if len(name) > len(buf) {
		return strings.ToLower(string(name))
	}
	lb := buf[:len(name)]
	for i := range len(name) {
		ch := name[i]
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		lb[i] = ch
	}
	if s, ok := c.names[string(lb)]; ok {
		return s
	}
	s := string(lb)
	if len(c.names) < h2MaxInterned {
		c.names[s] = s
	}
	return s
}

// h2MaxInterned bounds a connection's interned header names.
const h2MaxInterned = 256
