package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// MaxResponseHead bounds a backend's response head, informational (1xx)
// heads included, in bytes: 1 MiB. Beyond it the answer is a malformed
// one (h1wire.ErrBadResponse; the edge answers 502).
const MaxResponseHead = 1 << 20

// Transport is the hot-path http.RoundTripper of one backend:
// bodiless GET and HEAD requests that do not ask for an upgrade are written
// and their response read synchronously in the calling goroutine over a pool
// of kept-alive connections, without the reader and writer goroutines (and
// their channel hand-offs) of http.Transport. Every other request (a body,
// an upgrade, another method) goes to fallback, a tuned http.Transport, so
// streaming uploads, 100-continue and WebSocket keep the standard behaviour.
//
// A pooled connection the backend closed while idle shows up as an error
// before any response byte; the request is then retried once on a fresh
// connection (GET and HEAD are idempotent). Errors are the net and
// context errors Classify maps to 502/503/504.
type Transport struct {
	addr        string
	dialer      *net.Dialer
	fallback    *http.Transport
	idleTimeout time.Duration
	maxIdle     int

	mu   sync.Mutex
	idle []*Conn
	// retired is set while no snapshot routes to addr: connections are
	// closed instead of pooled when their request ends.
	retired atomic.Bool
	// closes counts CloseIdleConnections calls: the event loops' own pools
	// close connections pooled before the last one.
	closes atomic.Uint64
	// loopAddr is addr when it is a literal IP and port (the event loops
	// dial only those; zero: requests to it leave the loop).
	loopAddr netip.AddrPort
}

// Conn is one kept-alive backend connection with its buffers (4 KiB
// each). R and W read and write C; a Conn is used by one exchange at a
// time, and goes back to its Transport (Put) or is closed (C.Close) when
// the exchange ends.
type Conn struct {
	C         net.Conn      // the connection to the backend
	R         *bufio.Reader // reads C (response heads bounded while Transport reads them)
	W         *bufio.Writer // writes C (the request head)
	idleSince time.Time
	// watchUntil is the read deadline the HTTP/1.1 loop armed (zero: none).
	watchUntil time.Time
	// rc, peek and clean serve usable (usable_unix.go), made on first use.
	rc    syscall.RawConn
	peek  func(fd uintptr)
	clean bool
	// head bounds what R reads from C while http.ReadResponse reads
	// response heads (it has no limit of its own).
	head headBudget
}

// NewConn wraps a backend connection c in its buffers. A c that replays
// bytes read before (the event loops' hand-over) reports how many are
// left with an Unread() int method: such a connection is not pooled while
// any are.
func NewConn(c net.Conn) *Conn {
	fc := &Conn{C: c, W: bufio.NewWriterSize(c, 4096)}
	fc.head.r = c
	fc.R = bufio.NewReaderSize(&fc.head, 4096)
	return fc
}

// errResponseHeadTooLarge fails a response whose heads (informational ones
// included) pass MaxResponseHead (502).
var errResponseHeadTooLarge = errors.New("backend response head larger than 1 MiB")

// headBudget reads from r; while armed it fails once more than left bytes
// have been read.
type headBudget struct {
	r     io.Reader
	armed bool
	left  int
}

func (h *headBudget) Read(p []byte) (int, error) {
	if !h.armed {
		return h.r.Read(p)
	}
	if h.left <= 0 {
		return 0, errResponseHeadTooLarge
	}
	n, err := h.r.Read(p[:min(len(p), h.left)])
	h.left -= n
	return n, err
}

// setWatch sets the connection's read deadline and remembers it.
func (fc *Conn) setWatch(t time.Time) {
	fc.watchUntil = t
	_ = fc.C.SetReadDeadline(t)
}

// NewTransport returns the Transport to the backend at addr (host:port):
// its own connections are dialed within dialTimeout and kept at most 256
// idle, each for less than idleTimeout; the fallback http.Transport has
// the same dial timeout (or a route's, Timeouts.Dial), 256 idle
// connections, no compression, no HTTP/2, and MaxResponseHead.
func NewTransport(addr string, dialTimeout, idleTimeout time.Duration) *Transport {
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			if d, ok := ctx.Value(dialTimeoutKey{}).(time.Duration); ok {
				dd := *dialer
				dd.Timeout = d
				return dd.DialContext(ctx, network, a)
			}
			return dialer.DialContext(ctx, network, a)
		},
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       idleTimeout,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     false,
		DisableCompression:    true,
		// As the event loop's and Transport's limit (502 beyond).
		MaxResponseHeaderBytes: MaxResponseHead,
	}
	ap, _ := netip.ParseAddrPort(addr)
	return &Transport{
		loopAddr:    ap,
		addr:        addr,
		dialer:      &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second},
		fallback:    tr,
		idleTimeout: idleTimeout,
		maxIdle:     256,
	}
}

// LoopAddr is the backend's address when it is a literal IP and port (the
// event loops dial only those); the zero AddrPort otherwise.
func (t *Transport) LoopAddr() netip.AddrPort { return t.loopAddr }

// DialTimeout is the edge-wide dial timeout of t's connections.
func (t *Transport) DialTimeout() time.Duration { return t.dialer.Timeout }

// IdleTimeout is how long an idle connection may stay pooled.
func (t *Transport) IdleTimeout() time.Duration { return t.idleTimeout }

// SetRetired marks t retired (no snapshot routes to it: connections are
// closed instead of pooled when their request ends) or routed again.
func (t *Transport) SetRetired(retired bool) { t.retired.Store(retired) }

// Retired reports whether t is retired (SetRetired).
func (t *Transport) Retired() bool { return t.retired.Load() }

// Closes counts the CloseIdleConnections calls so far: a pool of t's
// connections kept elsewhere (the event loops') drops the ones it pooled
// before the last call.
func (t *Transport) Closes() uint64 { return t.closes.Load() }

// eligible reports whether req can take the synchronous path.
func eligible(req *http.Request) bool {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0 {
		return false
	}
	if req.ContentLength < 0 || len(req.TransferEncoding) > 0 {
		return false
	}
	return req.Header.Get("Upgrade") == ""
}

// RoundTrip implements http.RoundTripper with the edge-wide dial timeout
// and no response header timeout.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !eligible(req) {
		return t.fallback.RoundTrip(req)
	}
	return t.roundTrip(req, Timeouts{})
}

// roundTrip sends an eligible request with a route's timeouts and returns
// the response; the body owns the connection. A reused connection that
// fails before any response byte is retried once on a new one.
func (t *Transport) roundTrip(req *http.Request, tm Timeouts) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		fc, reused, err := t.Get(ctx, tm.Dial, attempt == 0)
		if err != nil {
			return nil, err
		}
		resp, err := t.exchange(ctx, fc, req, tm.ResponseHeader)
		if err == nil {
			return resp, nil
		}
		_ = fc.C.Close()
		var re *retryableError
		if errors.As(err, &re) {
			var ne net.Error
			timedOut := errors.As(re.err, &ne) && ne.Timeout()
			if reused && attempt == 0 && ctx.Err() == nil && !timedOut {
				continue
			}
			err = re.err
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
}

// retryableError marks a failure before any response byte was read.
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// exchange writes req on fc and reads the response head. On success the
// response body owns fc: it returns fc to the pool at EOF or closes it.
func (t *Transport) exchange(ctx context.Context, fc *Conn, req *http.Request, responseHeaderTimeout time.Duration) (*http.Response, error) {
	if !fc.watchUntil.IsZero() {
		fc.setWatch(time.Time{}) // a deadline the HTTP/1.1 loop left
	}
	// Cancelation (client gone) and the response header timeout both act by
	// moving the connection's deadline.
	stop := context.AfterFunc(ctx, func() { _ = fc.C.SetDeadline(time.Unix(1, 0)) })
	if responseHeaderTimeout > 0 {
		_ = fc.C.SetReadDeadline(time.Now().Add(responseHeaderTimeout))
	}
	if err := req.Write(fc.W); err != nil {
		stop()
		return nil, &retryableError{err}
	}
	if err := fc.W.Flush(); err != nil {
		stop()
		return nil, &retryableError{err}
	}
	var resp *http.Response
	// The heads, informational ones included, within MaxResponseHead
	// read from the connection (what R reads ahead of the final head's
	// end counts too: at most 4 KiB).
	fc.head.armed, fc.head.left = true, MaxResponseHead
	defer func() { fc.head.armed = false }()
	for {
		if _, err := fc.R.Peek(1); err != nil {
			stop()
			return nil, &retryableError{err}
		}
		r, err := http.ReadResponse(fc.R, req)
		if err != nil {
			stop()
			if errors.Is(err, errResponseHeadTooLarge) {
				return nil, h1wire.ErrBadResponse
			}
			return nil, err
		}
		if r.StatusCode >= 100 && r.StatusCode < 200 && r.StatusCode != http.StatusSwitchingProtocols {
			continue // 1xx informational: the final response follows
		}
		resp = r
		break
	}
	if responseHeaderTimeout > 0 {
		_ = fc.C.SetReadDeadline(time.Time{})
		if ctx.Err() != nil {
			_ = fc.C.SetDeadline(time.Unix(1, 0))
		}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		stop()
		_ = resp.Body.Close()
		return nil, errors.New("backend switched protocols without an upgrade request")
	}
	reusable := !resp.Close && !req.Close
	if resp.Body == http.NoBody || resp.ContentLength == 0 && resp.Body != nil {
		// Nothing to read: release now.
		_ = resp.Body.Close()
		resp.Body = http.NoBody
		if stop() && reusable {
			t.Put(fc)
		} else {
			_ = fc.C.Close()
		}
		return resp, nil
	}
	resp.Body = &fastBody{rc: resp.Body, t: t, fc: fc, stop: stop, reusable: reusable}
	return resp, nil
}

// fastBody returns its connection to the pool once the body was read to
// EOF, and closes it when the body is closed early.
type fastBody struct {
	rc       io.ReadCloser
	t        *Transport
	fc       *Conn
	stop     func() bool
	reusable bool
	done     bool
}

func (b *fastBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if errors.Is(err, io.EOF) {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
	}
	return n, err
}

func (b *fastBody) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

func (b *fastBody) finish(complete bool) {
	b.done = true
	_ = b.rc.Close()
	if b.stop() && complete && b.reusable {
		b.t.Put(b.fc)
		return
	}
	_ = b.fc.C.Close()
}

// Get returns an idle connection (reused=true) when pooled, or dials a new
// one (within dialTimeout, or the edge-wide one when it is 0; the error is
// the dialer's). A retry after a reused connection failed passes
// pooled=false: the pool's other connections may be as dead (a backend
// that closed them all, as net/http's Transport also guards against).
func (t *Transport) Get(ctx context.Context, dialTimeout time.Duration, pooled bool) (*Conn, bool, error) {
	now := time.Now()
	t.mu.Lock()
	for n := len(t.idle); pooled && n > 0; n = len(t.idle) {
		fc := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		if now.Sub(fc.idleSince) >= t.idleTimeout {
			_ = fc.C.Close()
			continue
		}
		t.mu.Unlock()
		// Bytes the backend sent after the last response ended (a body
		// on a HEAD/204/304, a longer body than announced) would be read
		// as the next client's answer: such a connection, or one the
		// backend closed, is dropped (http.Transport has a reader on every
		// idle connection for this).
		if fc.usable() {
			return fc, true, nil
		}
		_ = fc.C.Close()
		t.mu.Lock()
	}
	t.mu.Unlock()
	d := t.dialer
	if dialTimeout > 0 {
		dd := *d
		dd.Timeout = dialTimeout
		d = &dd
	}
	c, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, false, err
	}
	return NewConn(c), false, nil
}

// unreader is a connection that replays bytes read before (NewConn).
type unreader interface{ Unread() int }

// Put returns fc to the idle pool (or closes it when the pool is full, the
// transport is retired, or bytes are left unread after the response).
func (t *Transport) Put(fc *Conn) {
	if rc, ok := fc.C.(unreader); fc.R.Buffered() > 0 || ok && rc.Unread() > 0 {
		_ = fc.C.Close() // unexpected bytes after the response
		return
	}
	fc.idleSince = time.Now()
	t.mu.Lock()
	if t.retired.Load() || len(t.idle) >= t.maxIdle {
		t.mu.Unlock()
		_ = fc.C.Close()
		return
	}
	t.idle = append(t.idle, fc)
	t.mu.Unlock()
}

// SweepIdle closes the pooled connections idle for the idle timeout or
// longer at now (the oldest are first in the pool).
func (t *Transport) SweepIdle(now time.Time) {
	t.mu.Lock()
	n := 0
	for n < len(t.idle) && now.Sub(t.idle[n].idleSince) >= t.idleTimeout {
		n++
	}
	if n == 0 {
		t.mu.Unlock()
		return
	}
	expired := make([]*Conn, n)
	copy(expired, t.idle[:n])
	rest := copy(t.idle, t.idle[n:])
	clear(t.idle[rest:])
	t.idle = t.idle[:rest]
	t.mu.Unlock()
	for _, fc := range expired {
		_ = fc.C.Close()
	}
}

// CloseIdleConnections closes every idle connection of both paths.
func (t *Transport) CloseIdleConnections() {
	t.closes.Add(1)
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, fc := range idle {
		_ = fc.C.Close()
	}
	t.fallback.CloseIdleConnections()
}
