package h2srv

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// Stream is one request of a Conn, from its HEADERS until its
// handler has returned and its answer is queued.
type Stream struct {
	c  *Conn
	id uint32
	// ctx is the handler's context on the ServeHTTP path (nil on the fast
	// path, which sees a reset in reset), canceled with the stream.
	ctx    context.Context
	cancel context.CancelFunc
	// scratch is the worker's reusable buffers (fast path).
	scratch *Scratch

	// Under c.wmu: the send window and whether the stream can still be
	// written (reset: RST_STREAM sent or received; ended: END_STREAM
	// sent).
	sendWindow int32
	reset      bool
	ended      bool
	// peerReset: the client reset the stream; its later frames are a
	// stream error STREAM_CLOSED (RFC 9113 §5.1).
	peerReset bool
	// oversized: the header list is over h2MaxHeaderList (431).
	oversized bool
	// bodyOut counts the DATA payload bytes written (the access log's
	// bytes_out on the fast path).
	bodyOut int64
	// stallSlot: the stream holds one of the stall places
	// (h2MaxStalledPerConn, h2MaxStalled); under c.wmu.
	stallSlot bool
	// holdsBackend: the stream relays from a backend connection it holds
	// (the fast path's streamed answers; ServeHTTP's always count), so its
	// waits for window take a stall place; under c.wmu.
	holdsBackend bool
	// hsts is the route's Strict-Transport-Security value (fast path).
	hsts string

	// Under bmu: the request body as received and not yet read.
	bmu        sync.Mutex
	bcond      sync.Cond
	body       []byte
	bodyOff    int
	eof        bool  // END_STREAM received
	berr       error // the body failed (stream reset)
	bodyClosed bool  // the handler closed the body: later DATA is dropped
	recvWindow int32
	unacked    int32
	declared   int64 // content-length, -1: none (set by prepare)
	malformed  bool  // a bad content-length (prepare)
	got        int64
	deadline   time.Time
	dlTimer    *time.Timer
	// trailer is the set of the request's declared trailers (read only
	// once prepare made it); gotTrailer the trailers received, copied into
	// reqTrailer (the request's Trailer) by the handler's goroutines only,
	// as the body reaches its end: the read loop never writes a map a
	// handler reads.
	trailer    http.Header
	gotTrailer http.Header
	reqTrailer http.Header

	w h2Response
}

// onHeaders opens a stream (or takes a stream's trailers); a returned
// error is a connection error.
func (c *Conn) onHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	size := headerListSize(f)
	c.decoded += size
	if f.Truncated || c.decoded > h2DecodeAllowance+h2DecodeRatio*c.wire.n {
		// Past the decode bound, or an HPACK bomb.
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	if f.HasPriority() && f.Priority.StreamDep == id {
		// A stream that depends on itself (RFC 9113 §5.3.1).
		c.mu.Lock()
		c.maxID = max(c.maxID, id)
		c.mu.Unlock()
		c.streamError(id, http2.ErrCodeProtocol)
		return nil
	}
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		c.mu.Unlock()
		if st.closedBothWays() {
			// Both sides sent END_STREAM: the stream is closed, though
			// its goroutine has not dropped it yet (the client read our
			// last frame first). HEADERS on a closed stream is a
			// connection error STREAM_CLOSED (RFC 9113 §5.1), as when
			// it is gone.
			return http2.ConnectionError(http2.ErrCodeStreamClosed)
		}
		st.onTrailers(f)
		return nil
	}
	if id <= c.maxID {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeStreamClosed)
	}
	c.maxID = id
	c.opened++
	if c.goAway {
		// After the final GOAWAY: not taken (the client retries it on a
		// new connection); a client that goes on is cut.
		c.mu.Unlock()
		if c.ignored++; c.ignored > h2MaxStreams {
			return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
		return nil
	}
	if c.active >= h2MaxStreams {
		c.mu.Unlock()
		c.streamError(id, http2.ErrCodeRefusedStream)
		if c.opened >= h2StreamBudget {
			c.finalGoAway()
		}
		return nil
	}
	if h2Malformed(f) {
		c.mu.Unlock()
		c.streamError(id, http2.ErrCodeProtocol)
		if c.opened >= h2StreamBudget {
			c.finalGoAway()
		}
		return nil
	}
	budgetSpent := c.opened >= h2StreamBudget
	st := &Stream{c: c, id: id, recvWindow: h2StreamWindow, declared: -1, eof: f.StreamEnded(), oversized: size > h2MaxHeaderList}
	st.bcond.L = &st.bmu
	st.w.st = st
	c.streams[id] = st
	c.active++
	c.handlers.Add(1)
	c.mu.Unlock()
	c.wmu.Lock()
	st.sendWindow = c.peerWindow
	c.wmu.Unlock()
	st.prepare(f)
	h2Go(h2Task{st: st, f: f})
	if budgetSpent {
		c.finalGoAway()
	}
	return nil
}

// h2ConnHeaders are the connection-specific header fields HTTP/2 forbids
// (RFC 9113 §8.2.2).
var h2ConnHeaders = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true,
}

// ConnectionSpecific reports whether the lower-case field name is one
// HTTP/2 forbids (a backend's trailer of that name is dropped).
func ConnectionSpecific(name string) bool { return h2ConnHeaders[name] }

// newRequest builds the request of f. ok is false for a malformed request
// (the stream is reset with PROTOCOL_ERROR); code is a status the edge
// answers itself (431 for a head over the bound, 405 for CONNECT, 400 for
// a bad path), 0 when the request is served.
func (st *Stream) newRequest(f *http2.MetaHeadersFrame) (req *http.Request, code int, ok bool) {
	if f.Truncated || st.oversized {
		return nil, http.StatusRequestHeaderFieldsTooLarge, true
	}
	method := f.PseudoValue("method")
	path := f.PseudoValue("path")
	scheme := f.PseudoValue("scheme")
	authority := f.PseudoValue("authority")
	if method == "CONNECT" {
		return nil, http.StatusMethodNotAllowed, true
	}
	if !validMethod(method) || !validRequestPath(method, path) || scheme == "" {
		return nil, 0, false
	}
	h := make(http.Header, len(f.Fields))
	var cookies []string
	for _, hf := range f.RegularFields() {
		if h2ConnHeaders[hf.Name] || (hf.Name == "te" && hf.Value != "trailers") {
			return nil, 0, false
		}
		if hf.Name == "cookie" {
			cookies = append(cookies, hf.Value)
			continue
		}
		k := textproto.CanonicalMIMEHeaderKey(hf.Name)
		h[k] = append(h[k], hf.Value)
	}
	if len(cookies) > 0 {
		h["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if authority == "" {
		authority = h.Get("Host")
	}
	if !httpguts.ValidHostHeader(authority) {
		return nil, http.StatusBadRequest, true
	}
	u, err := url.ParseRequestURI(path)
	if err != nil {
		return nil, http.StatusBadRequest, true
	}
	st.w.head = method == http.MethodHead
	req = &http.Request{
		Method: method, URL: u, Proto: "HTTP/2.0", ProtoMajor: 2,
		Header: h, Host: authority, RemoteAddr: st.c.remote,
		RequestURI: path, TLS: st.c.st, Body: http.NoBody,
	}
	if st.malformed {
		return nil, 0, false
	}
	if !f.StreamEnded() {
		req.ContentLength = st.declared
		req.Body = &h2Body{st: st}
		st.bmu.Lock()
		st.reqTrailer = st.trailer.Clone()
		st.copyTrailersLocked()
		req.Trailer = st.reqTrailer
		st.bmu.Unlock()
	}
	return req.WithContext(st.ctx), 0, true
}

// prepare reads, on the read loop before the stream's handler starts, what
// the body's DATA frames are checked against: the declared content-length
// and trailers (a bad content-length makes the request malformed).
func (st *Stream) prepare(f *http2.MetaHeadersFrame) {
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "content-length":
			// 1*DIGIT (RFC 9110 §8.6): no sign.
			u, err := strconv.ParseUint(hf.Value, 10, 63)
			n := int64(u)
			if err != nil || st.declared >= 0 || f.StreamEnded() && n > 0 {
				st.malformed = true
			}
			st.declared = n
		case "trailer":
			for _, k := range strings.Split(hf.Value, ",") {
				k = textproto.CanonicalMIMEHeaderKey(textproto.TrimString(k))
				if k != "" && httpguts.ValidTrailerHeader(k) {
					if st.trailer == nil {
						st.trailer = http.Header{}
					}
					st.trailer[k] = nil
				}
			}
		}
	}
}

// closedBothWays reports whether the client ended its side of st
// (END_STREAM received) and the edge queued its END_STREAM: the stream is
// closed (RFC 9113 §5.1) even while it is still in c.streams.
func (st *Stream) closedBothWays() bool {
	st.c.wmu.Lock()
	ended := st.ended && !st.reset
	st.c.wmu.Unlock()
	if !ended {
		return false
	}
	st.bmu.Lock()
	defer st.bmu.Unlock()
	return st.eof
}

// peerClosed reports whether the client reset st.
func (st *Stream) peerClosed() bool {
	st.c.wmu.Lock()
	defer st.c.wmu.Unlock()
	return st.peerReset
}

// onTrailers takes the trailers of a request body (HEADERS with
// END_STREAM after DATA); only declared trailers are kept. HEADERS on a
// stream the client reset is a stream error STREAM_CLOSED.
func (st *Stream) onTrailers(f *http2.MetaHeadersFrame) {
	if st.peerClosed() {
		st.c.streamError(st.id, http2.ErrCodeStreamClosed)
		return
	}
	st.bmu.Lock()
	if st.eof {
		st.bmu.Unlock()
		st.c.streamError(st.id, http2.ErrCodeStreamClosed)
		return
	}
	if !f.StreamEnded() || (st.declared >= 0 && st.got != st.declared) {
		st.bmu.Unlock()
		st.c.wmu.Lock()
		st.resetLocked(http2.ErrCodeProtocol, true)
		st.c.wmu.Unlock()
		return
	}
	for _, hf := range f.RegularFields() {
		k := textproto.CanonicalMIMEHeaderKey(hf.Name)
		if _, declared := st.trailer[k]; declared {
			if st.gotTrailer == nil {
				st.gotTrailer = http.Header{}
			}
			st.gotTrailer[k] = append(st.gotTrailer[k], hf.Value)
		}
	}
	st.eof = true
	st.bcond.Broadcast()
	st.bmu.Unlock()
}

// copyTrailersLocked moves the trailers received into the request's
// Trailer (under bmu, on a handler's goroutine).
func (st *Stream) copyTrailersLocked() {
	for k, vs := range st.gotTrailer {
		st.reqTrailer[k] = vs
	}
	st.gotTrailer = nil
}

// onData takes a DATA frame: its bytes are counted against the windows
// and queued for the stream's body; a returned error is a connection
// error.
func (c *Conn) onData(f *http2.DataFrame) error {
	id, n := f.StreamID, int32(f.Length)
	c.mu.Lock()
	if n > c.recvWindow {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.recvWindow -= n
	st := c.streams[id]
	idle := id > c.maxID
	c.mu.Unlock()
	if idle {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	data := f.Data()
	if st == nil || st.peerClosed() || st.closedBothWays() {
		// A closed stream (gone, or both sides ended while its goroutine
		// has not dropped it yet), or one the client reset: refunded at
		// once, and a stream error STREAM_CLOSED (RFC 9113 §5.1).
		c.credit(nil, n, 0)
		c.streamError(id, http2.ErrCodeStreamClosed)
		return nil
	}
	keep, code := st.takeData(data, f.StreamEnded())
	pad := n - int32(len(data))
	if !keep {
		pad = n
	}
	// Padding, and data nobody will read, are refunded at once.
	c.credit(st, pad, pad)
	if code != 0 {
		c.wmu.Lock()
		st.resetLocked(code, true)
		c.wmu.Unlock()
	}
	return nil
}

// takeData queues data for the body; keep is false when it is dropped,
// code the stream error it calls for (0: none).
func (st *Stream) takeData(data []byte, end bool) (keep bool, code http2.ErrCode) {
	st.bmu.Lock()
	defer st.bmu.Unlock()
	if st.eof {
		return false, http2.ErrCodeStreamClosed
	}
	n := int32(len(data))
	if n > st.recvWindow {
		return false, http2.ErrCodeFlowControl
	}
	st.recvWindow -= n
	st.got += int64(n)
	if st.declared >= 0 && (st.got > st.declared || (end && st.got != st.declared)) {
		st.berr = errors.New("http2: request body length differs from its content-length")
		st.bcond.Broadcast()
		return false, http2.ErrCodeProtocol
	}
	if end {
		st.eof = true
	}
	st.bcond.Broadcast()
	if st.bodyClosed || st.berr != nil {
		return false, 0
	}
	st.body = append(st.body, data...)
	return true, 0
}

// credit returns n bytes of receive window to the connection and s of it
// to st (nil: none), sending WINDOW_UPDATE once a quarter of a window is
// owed.
func (c *Conn) credit(st *Stream, n, s int32) {
	if n <= 0 {
		return
	}
	var connInc, streamInc uint32
	c.mu.Lock()
	c.recvUnacked += n
	if c.recvUnacked >= h2WindowRefresh {
		connInc = uint32(c.recvUnacked)
		c.recvWindow += c.recvUnacked
		c.recvUnacked = 0
	}
	c.mu.Unlock()
	if st != nil && s > 0 {
		st.bmu.Lock()
		if !st.eof {
			st.unacked += s
			if st.unacked >= h2WindowRefresh {
				streamInc = uint32(st.unacked)
				st.recvWindow += st.unacked
				st.unacked = 0
			}
		}
		st.bmu.Unlock()
	}
	if connInc == 0 && streamInc == 0 {
		return
	}
	c.wmu.Lock()
	if connInc > 0 {
		_ = c.fr.WriteWindowUpdate(0, connInc)
	}
	if streamInc > 0 && !st.reset {
		_ = c.fr.WriteWindowUpdate(st.id, streamInc)
	}
	c.kickLocked()
	c.wmu.Unlock()
}

// resetLocked ends st (under c.wmu): its handler's context is canceled,
// writes and body reads fail; send says whether we send RST_STREAM (we
// reset it) or the client did.
func (st *Stream) resetLocked(code http2.ErrCode, send bool) {
	if st.reset {
		return
	}
	st.reset = true
	if send && !st.ended {
		_ = st.c.fr.WriteRSTStream(st.id, code)
		st.c.kickLocked()
	}
	st.c.wcond.Broadcast()
	if st.cancel != nil {
		st.cancel()
	}
	st.bmu.Lock()
	if st.berr == nil {
		st.berr = errH2StreamReset
	}
	st.bcond.Broadcast()
	st.bmu.Unlock()
}

var errH2StreamReset = errors.New("http2: stream reset")

// h2Task is a stream for a worker to serve.
type h2Task struct {
	st *Stream
	f  *http2.MetaHeadersFrame
}

// Scratch is a worker's buffers, reused from stream to stream: the
// backend response head and its parsed form.
type Scratch struct {
	Head []byte
	Body []byte // a small answer's body (the edge's smallBody)
	Resp h1wire.Response
}

// h2Idle hands a stream to a worker goroutine waiting for one (h2Go).
var h2Idle = make(chan h2Task)

// h2WorkerIdle is how long a stream worker waits for its next stream.
const h2WorkerIdle = 10 * time.Second

// h2Go runs task on an idle stream worker, or a new one: a worker keeps
// the stack it grew and its scratch buffers, which a new goroutine per
// stream would make again every time.
func h2Go(task h2Task) {
	select {
	case h2Idle <- task:
	default:
		go h2Worker(task)
	}
}

func h2Worker(task h2Task) {
	t := time.NewTimer(h2WorkerIdle)
	defer t.Stop()
	sc := &Scratch{Head: make([]byte, 0, 1024)}
	for {
		task.st.scratch = sc
		task.st.run(task.f)
		if cap(sc.Head) > 64<<10 {
			sc.Head = make([]byte, 0, 1024)
		}
		if cap(sc.Resp.Headers) > 64 {
			sc.Resp.Headers = nil
		}
		t.Reset(h2WorkerIdle)
		select {
		case task = <-h2Idle:
		case <-t.C:
			return
		}
	}
}

// run serves the stream (the fast path, else ServeHTTP) and finishes it.
func (st *Stream) run(f *http2.MetaHeadersFrame) {
	aborted, fast := true, false
	defer func() {
		if p := recover(); p != nil && p != http.ErrAbortHandler {
			st.c.cfg.Logger.Error("http2: handler panic", "remote", st.c.remote, "panic", p)
		}
		st.finish(aborted, fast)
	}()
	if fast = st.serveFast(f); !fast {
		st.serveSlow(f)
	}
	aborted = false
}

// serveSlow serves the stream with Handler.ServeHTTP, or answers a request
// the edge refuses itself (newRequest).
func (st *Stream) serveSlow(f *http2.MetaHeadersFrame) {
	// The handler's context; under wmu, where resetLocked cancels it.
	st.c.wmu.Lock()
	st.holdsBackend = true
	st.ctx, st.cancel = context.WithCancel(st.c.ctx)
	if st.reset {
		st.cancel()
	}
	st.c.wmu.Unlock()
	req, code, ok := st.newRequest(f)
	switch {
	case !ok:
		st.c.wmu.Lock()
		st.resetLocked(http2.ErrCodeProtocol, true)
		st.c.wmu.Unlock()
	case code != 0:
		st.c.cfg.ErrorPage(&st.w, code, "gordon-edge: "+strconv.Itoa(code)+" "+http.StatusText(code)+"\n")
	default:
		st.c.cfg.Handler.ServeHTTP(&st.w, req)
	}
}

// finish queues the end of the answer (or a reset for an aborted
// handler), asks a client still sending to stop (RST_STREAM NO_ERROR),
// and removes the stream.
func (st *Stream) finish(aborted, fast bool) {
	c := st.c
	if aborted {
		c.wmu.Lock()
		st.resetLocked(http2.ErrCodeInternal, true)
		c.wmu.Unlock()
	} else if !fast {
		st.w.end()
	}
	st.closeBody()
	st.bmu.Lock()
	stillSending := !st.eof
	if st.dlTimer != nil {
		st.dlTimer.Stop()
	}
	st.bmu.Unlock()
	c.wmu.Lock()
	if stillSending && !st.reset {
		_ = c.fr.WriteRSTStream(st.id, http2.ErrCodeNo)
		st.reset = true
	}
	c.kickLocked()
	if st.cancel != nil {
		st.cancel()
	}
	c.wmu.Unlock()
	c.mu.Lock()
	delete(c.streams, st.id)
	c.active--
	last := c.active == 0
	closing := c.closing
	c.mu.Unlock()
	if last {
		if closing {
			c.closeWrite()
		} else {
			c.armIdle()
		}
	}
	c.handlers.Done()
}

// closeBody drops what the handler did not read (refunding its window)
// and makes later DATA be dropped.
func (st *Stream) closeBody() {
	st.bmu.Lock()
	unread := int32(len(st.body) - st.bodyOff)
	st.body, st.bodyOff = nil, 0
	st.bodyClosed = true
	st.bcond.Broadcast()
	st.bmu.Unlock()
	st.c.credit(nil, unread, 0)
}

// h2Body is a request body: DATA frames as they come.
type h2Body struct{ st *Stream }

// Read reads the body; it blocks for DATA, fails once the stream is
// reset and with os.ErrDeadlineExceeded past the read deadline (the body
// guard's idle bound, SetReadDeadline).
func (b *h2Body) Read(p []byte) (int, error) {
	st := b.st
	st.bmu.Lock()
	for st.bodyOff == len(st.body) && !st.eof && st.berr == nil && !st.bodyClosed {
		if !st.deadline.IsZero() && !time.Now().Before(st.deadline) {
			st.bmu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		st.bcond.Wait()
	}
	if st.bodyOff < len(st.body) {
		n := copy(p, st.body[st.bodyOff:])
		st.bodyOff += n
		if st.bodyOff == len(st.body) {
			st.body, st.bodyOff = st.body[:0], 0
		}
		st.bmu.Unlock()
		st.c.credit(st, int32(n), int32(n))
		return n, nil
	}
	err := st.berr
	if err == nil {
		err = io.EOF
		if st.bodyClosed && !st.eof {
			err = http.ErrBodyReadAfterClose
		} else {
			st.copyTrailersLocked()
		}
	}
	st.bmu.Unlock()
	return 0, err
}

// Close stops the body: unread and later bytes are dropped.
func (b *h2Body) Close() error {
	b.st.closeBody()
	return nil
}

// setReadDeadline bounds the body reads (zero: none).
func (st *Stream) setReadDeadline(t time.Time) {
	st.bmu.Lock()
	defer st.bmu.Unlock()
	st.deadline = t
	if st.dlTimer != nil {
		st.dlTimer.Stop()
		st.dlTimer = nil
	}
	if !t.IsZero() {
		st.dlTimer = time.AfterFunc(time.Until(t), func() {
			st.bmu.Lock()
			st.bcond.Broadcast()
			st.bmu.Unlock()
		})
	}
	st.bcond.Broadcast()
}
