package h2srv

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Response is a stream's http.ResponseWriter (and http.Flusher, and the
// read deadline http.ResponseController sets). Body bytes are held until
// a frame's worth, a Flush or the handler's end, so a small answer is
// HEADERS and DATA with END_STREAM, queued together.
type h2Response struct {
	st          *Stream
	h           http.Header
	code        int // the final status, 0 until WriteHeader
	sentHeaders bool
	trailers    []string // declared in the Trailer header at WriteHeader
	head        bool     // a HEAD request: body bytes are dropped
	pend        []byte
	err         error
}

var errH2StreamClosed = errors.New("http2: stream closed")

func (w *h2Response) Header() http.Header {
	if w.h == nil {
		w.h = make(http.Header, 8)
	}
	return w.h
}

// WriteHeader sends a 1xx answer at once (its header fields then stay in
// the map, as with net/http); the final status is sent with the first
// body bytes, a Flush or the handler's end.
func (w *h2Response) WriteHeader(code int) {
	if w.code != 0 {
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		c := w.st.c
		c.wmu.Lock()
		_ = w.st.writeHeadersLocked(code, w.h, nil, false)
		c.kickLocked()
		c.wmu.Unlock()
		return
	}
	w.code = code
	for _, v := range w.h["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k != "" {
				w.trailers = append(w.trailers, k)
			}
		}
	}
}

func (w *h2Response) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.head || bodyless(w.code) {
		return len(p), nil
	}
	w.pend = append(w.pend, p...)
	if len(w.pend) >= 2*h2MaxFrameSize {
		if err := w.send(false); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (w *h2Response) WriteString(s string) (int, error) {
	if len(s) <= 2*h2MaxFrameSize-len(w.pend) && w.code != 0 && w.err == nil && !w.head && !bodyless(w.code) {
		w.pend = append(w.pend, s...)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// Flush sends the head and the body bytes held so far.
func (w *h2Response) Flush() { _ = w.FlushError() }

func (w *h2Response) FlushError() error {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return w.err
	}
	return w.send(false)
}

// SetReadDeadline bounds the request body's reads (the body guard).
func (w *h2Response) SetReadDeadline(t time.Time) error {
	w.st.setReadDeadline(t)
	return nil
}

// SetWriteDeadline is accepted and has no effect: a connection's writes
// are bounded by Config.WriteTimeout.
func (w *h2Response) SetWriteDeadline(time.Time) error { return nil }

// bodyless reports whether an answer with code has no body (RFC 9110
// §6.4.1).
func bodyless(code int) bool {
	return code == http.StatusNoContent || code == http.StatusNotModified
}

// send queues the head (once) and the held body bytes; end closes the
// stream (with trailers when any were set).
func (w *h2Response) send(end bool) error {
	st, c := w.st, w.st.c
	var trailers http.Header
	if end {
		trailers = w.trailerFields()
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var err error
	if !w.sentHeaders {
		w.sentHeaders = true
		endNow := end && len(w.pend) == 0 && len(trailers) == 0
		err = st.writeHeadersLocked(w.code, w.h, w.trailers, endNow)
	}
	if err == nil && (len(w.pend) > 0 || (end && !st.ended && len(trailers) == 0)) {
		err = st.writeDataLocked(w.pend, end && len(trailers) == 0)
		w.pend = w.pend[:0]
	}
	if err == nil && end && len(trailers) > 0 {
		err = st.writeHeadersLocked(0, trailers, nil, true)
	}
	c.kickLocked()
	if err != nil {
		w.err = err
	}
	return err
}

// end finishes the answer when the handler returns.
func (w *h2Response) end() {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err == nil {
		_ = w.send(true)
	}
}

// trailerFields are the trailers to send: the declared ones set, and
// those set with http.TrailerPrefix.
func (w *h2Response) trailerFields() http.Header {
	var t http.Header
	for _, k := range w.trailers {
		if vs := w.h[k]; len(vs) > 0 {
			if t == nil {
				t = http.Header{}
			}
			t[k] = vs
		}
	}
	for k, vs := range w.h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			if t == nil {
				t = http.Header{}
			}
			t[http.CanonicalHeaderKey(k[len(http.TrailerPrefix):])] = vs
		}
	}
	return t
}

// writeHeadersLocked queues a HEADERS block (and its CONTINUATIONs) for
// st, under c.wmu: the status (none for trailers, code 0) and the fields
// of h HTTP/2 allows, less the declared trailers.
func (st *Stream) writeHeadersLocked(code int, h http.Header, skip []string, end bool) error {
	c := st.c
	if err := st.beginBlockLocked(code); err != nil {
		return err
	}
	for k, vs := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) || slices.Contains(skip, k) {
			continue
		}
		lk := lowerName(c, k)
		if h2ConnHeaders[lk] || !httpguts.ValidHeaderFieldName(lk) {
			continue
		}
		for _, v := range vs {
			if httpguts.ValidHeaderFieldValue(v) {
				_ = c.henc.WriteField(hpack.HeaderField{Name: lk, Value: v})
			}
		}
	}
	st.writeBlockLocked(end)
	return nil
}

// beginBlockLocked starts a header block in c.hbuf, with :status when
// code is not 0 (trailers), once the output buffer has room.
func (st *Stream) beginBlockLocked(code int) error {
	if err := st.waitRoomLocked(); err != nil {
		return err
	}
	c := st.c
	c.hbuf.b = c.hbuf.b[:0]
	if code != 0 {
		_ = c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: statusString(code)})
	}
	return nil
}

// writeBlockLocked queues the header block encoded in c.hbuf as HEADERS
// and CONTINUATION frames.
func (st *Stream) writeBlockLocked(end bool) {
	c := st.c
	block := c.hbuf.b
	for first := true; first || len(block) > 0; first = false {
		n := min(len(block), h2MaxFrameSize)
		frag := block[:n]
		block = block[n:]
		if first {
			_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0})
		} else {
			_ = c.fr.WriteContinuation(st.id, len(block) == 0, frag)
		}
	}
	if end {
		st.ended = true
	}
}

// waitRoomLocked waits (c.wcond) while the output buffer is at its bound
// (h2MaxBuffered), so that heads, like DATA, do not pile up for a client
// that does not read; it fails once the stream cannot be written.
func (st *Stream) waitRoomLocked() error {
	c := st.c
	for {
		if st.reset || st.ended || c.werr != nil {
			return errH2StreamClosed
		}
		if len(c.out.b) < h2MaxBuffered {
			return nil
		}
		c.kickLocked()
		c.wcond.Wait()
	}
}

// writeDataLocked queues p as DATA frames within the client's windows and
// the output bound, waiting (c.wcond) for room; end sets END_STREAM on the
// last frame (an empty frame when p is empty). A wait for window longer
// than c.cfg.StallTimeout resets the stream.
func (st *Stream) writeDataLocked(p []byte, end bool) error {
	c := st.c
	var stalled time.Time
	var wake *time.Timer
	defer func() {
		if wake != nil {
			wake.Stop()
		}
		st.releaseStallLocked()
	}()
	for {
		if st.reset || st.ended || c.werr != nil {
			return errH2StreamClosed
		}
		if len(p) == 0 {
			if end {
				_ = c.fr.WriteData(st.id, true, nil)
				st.ended = true
			}
			return nil
		}
		if len(c.out.b) >= h2MaxBuffered {
			c.kickLocked()
			c.wcond.Wait()
			continue
		}
		n := min(int32(len(p)), st.sendWindow, c.sendWindow, int32(min(c.peerMaxRead, h2MaxFrameSize)))
		if n <= 0 {
			if stalled.IsZero() {
				if !st.takeStallLocked() {
					st.resetLocked(http2.ErrCodeCancel, true)
					return errH2StreamClosed
				}
				stalled = time.Now()
				wake = st.armStallWake(wake)
			} else if time.Since(stalled) >= c.cfg.StallTimeout {
				st.resetLocked(http2.ErrCodeCancel, true)
				return errH2StreamClosed
			}
			if len(c.out.b) > 0 {
				// What is queued goes out (the client widens the window
				// once it has read it); no empty flush, whose wake-up
				// would bring this writer straight back here.
				c.kickLocked()
			}
			c.wcond.Wait()
			continue
		}
		stalled = time.Time{}
		st.releaseStallLocked()
		last := end && int(n) == len(p)
		_ = c.fr.WriteData(st.id, last, p[:n])
		st.bodyOut += int64(n)
		st.sendWindow -= n
		c.sendWindow -= n
		p = p[n:]
		if last {
			st.ended = true
			return nil
		}
	}
}

// takeStallLocked takes a place among the streams waiting for window
// (h2MaxStalledPerConn of the connection, h2MaxStalled of the edge) for
// a stream that holds a backend connection; false when none is left
// (under c.wmu).
func (st *Stream) takeStallLocked() bool {
	c := st.c
	if st.stallSlot || !st.holdsBackend {
		return true
	}
	if c.stalled >= h2MaxStalledPerConn {
		return false
	}
	if c.cfg.Stalled.Add(1) > h2MaxStalled {
		c.cfg.Stalled.Add(-1)
		return false
	}
	c.stalled++
	st.stallSlot = true
	return true
}

// releaseStallLocked gives the stream's stall place back (under c.wmu).
func (st *Stream) releaseStallLocked() {
	if st.stallSlot {
		st.stallSlot = false
		st.c.stalled--
		st.c.cfg.Stalled.Add(-1)
	}
}

// armStallWake (re)arms t to wake the connection's writers once
// c.cfg.StallTimeout has passed.
func (st *Stream) armStallWake(t *time.Timer) *time.Timer {
	c := st.c
	if t != nil {
		t.Reset(c.cfg.StallTimeout)
		return t
	}
	return time.AfterFunc(c.cfg.StallTimeout, func() {
		c.wmu.Lock()
		c.wcond.Broadcast()
		c.wmu.Unlock()
	})
}

// statusStrings are the :status values of the codes 100–599.
var statusStrings = func() (s [600]string) {
	for i := 100; i < len(s); i++ {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func statusString(code int) string {
	if code >= 100 && code < len(statusStrings) {
		return statusStrings[code]
	}
	return strconv.Itoa(code)
}
