package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h2srv"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/handoff"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// The edge's own HTTP/1.1 connection loop.
//
// net/http's server costs a background read goroutine, a cancelable
// context, a Request with a parsed URL and a Header map, and a
// ResponseWriter per request; on this hot path that was most of the gap to
// nginx. ConnServer accepts the public connections itself and serves, on the
// connection's goroutine and without allocating per request, the requests
// that make up nearly all of an app's traffic: HTTP/1.1 GET and HEAD with
// no body and no upgrade, for a routed host, with well-formed headers. The
// request is written straight onto a pooled backend connection
// (upstream.Transport) and the response relayed as it comes (Content-Length
// bodies copied, chunked bodies passed through chunk by chunk with their
// trailers, bodies delimited by the backend closing re-chunked), flushed
// whenever the backend has nothing more buffered, so server-sent events
// pass as sent.
//
// Anything else (a body, an upgrade, Expect, HTTP/1.0, an unknown host, a
// header it does not fully accept, heads over 32 KiB) is handed off, at a
// request boundary, to the net/http server together with every byte read
// so far; the connection then stays with net/http (ServeHTTP, ReverseProxy)
// for the rest of its life, which answers malformed requests 400 and
// oversized heads 431 without reaching a backend.
//
// On Linux, event loops (evloop_linux.go) take the connections first and
// serve the simplest exchanges without a goroutine; a connection that
// asks for more is handed to RunConn here, with the exchange in progress
// (h1Resume), and stays on its goroutine from then on.
//
// Timeouts match the net/http server's configuration: IdleTimeout between
// requests, ReadHeaderTimeout from the first byte of a request to the end
// of its head, no write timeout. A client that disconnects while its
// backend works is noticed within upstream.Tick (a non-blocking peek at the
// client each time the backend read deadline passes), and the backend
// connection is closed, as net/http cancels the request's context.

// MaxRequestHead bounds a request head (request line and headers) on both
// HTTP paths; a larger one is answered 431. net/http allows 4 KiB over
// MaxHeaderBytes.
const MaxRequestHead = 32 << 10

// h1MaxHead bounds a request head served by the loop; a larger head goes to
// net/http with what was read, which answers 431 (MaxRequestHead).
const h1MaxHead = MaxRequestHead

var crlfcrlf = []byte("\r\n\r\n")

// H1MaxResponseHead bounds a backend's response head (502 beyond).
const H1MaxResponseHead = upstream.MaxResponseHead

// Connection states (H1Conn.state).
const (
	h1Idle int32 = iota
	h1Active
	h1Closed
)

// ConnServer is the accept loop of the public HTTP listener and the
// registry of every client connection the edge serves itself: HTTP/1.1
// connections, plain or TLS (H1Conn, possibly on an event loop), HTTPS
// connections during their handshake, and HTTP/2 connections (h2srv.Conn).
// shutdown drains them all together.
type ConnServer struct {
	Core              *Core
	Handoff           *handoff.HandoffListener
	IdleTimeout       time.Duration
	ReadHeaderTimeout time.Duration

	// Loops are the event loops that serve connections while their
	// requests stay simple (evloop_linux.go); none: a goroutine per
	// connection from the start.
	Loops []*evLoop
	next  int

	Mu    sync.Mutex
	Conns map[*H1Conn]struct{}
	// Handshaking are the HTTPS connections accepted and not yet
	// handshaken (tls_accept.go), in wg already.
	Handshaking map[*tls.Conn]struct{}
	// H2Conns are the HTTPS connections served by the edge's HTTP/2
	// server (internal/h2srv), in wg until their last handler returns.
	H2Conns  map[*h2srv.Conn]struct{}
	Shutting atomic.Bool
	// shutAt is when shutdown began (unix nano): idle connections get
	// DrainIdleGrace from then (or from going idle) to send a request.
	shutAt atomic.Int64
	WG     sync.WaitGroup
}

// drainHandshakeGrace bounds, from the start of a drain, a handshake in
// progress (a ClientHello on its way and the round trip after it); a
// client that sends nothing frees the drain then, as an idle connection
// does after DrainIdleGrace.
const drainHandshakeGrace = time.Second

// DrainIdleGrace is how long a drain leaves an idle client connection open
// for a request already on its way (a keep-alive client's next request, a
// new connection's first one): such a request is answered, with
// Connection: close, instead of the connection being closed under it.
const DrainIdleGrace = 250 * time.Millisecond

// H1Conn is one client connection served by the loop.
type H1Conn struct {
	Conn  net.Conn
	state atomic.Int32
	br    *bufio.Reader
	bw    *bufio.Writer
	head  []byte
	Req   h1wire.Request
	// resp and rhead are the backend response of the current request.
	resp  h1wire.Response
	rhead []byte
	// writeUntil is the client write deadline armed (H1SendTimeout).
	writeUntil time.Time
	// Watch bounds the current request's backend reads (Gone:
	// PeerClosed); wait is its Wait, bound once per connection.
	upstream.Watch
	wait func(error) error
	// Per-connection forwarded values (the peer does not change).
	Peer    string
	PeerIP  netip.Addr
	Trusted bool
	// fwdHost/fwd cache the Forwarded element for the last Host seen.
	fwdHost string
	fwd     string
	// sent counts the bytes written to c; bodyMark is sent plus what was
	// buffered once the current answer's head was written (-1: none), so
	// the access log counts the body bytes.
	sent, bodyMark int64
}

var (
	h1ReaderPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
	h1WriterPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
)

func NewConnServer(s *Core, addr net.Addr, idleTimeout, readHeaderTimeout time.Duration) *ConnServer {
	return &ConnServer{
		Core:              s,
		Handoff:           handoff.NewHandoffListener(addr),
		IdleTimeout:       idleTimeout,
		ReadHeaderTimeout: readHeaderTimeout,
		Conns:             make(map[*H1Conn]struct{}),
		Handshaking:       make(map[*tls.Conn]struct{}),
		H2Conns:           make(map[*h2srv.Conn]struct{}),
	}
}

// Accept returns ln's next connection, sleeping through timeouts and
// temporary errors (5 ms doubling to 1 s); a nil connection ends the accept
// loop: nil error when ln was closed or the server is shutting down, else
// the error that ends it for good.
func (h *ConnServer) Accept(ln net.Listener) (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		if errors.Is(err, net.ErrClosed) || h.Shutting.Load() {
			return nil, nil
		}
		var ne net.Error
		if !(errors.As(err, &ne) && ne.Timeout() || isTemporary(err)) {
			return nil, err
		}
		backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
		time.Sleep(backoff)
	}
}

// Serve accepts connections on ln until it is closed (returns nil) or fails
// for good.
func (h *ConnServer) Serve(ln net.Listener) error {
	for {
		c, err := h.Accept(ln)
		if c == nil {
			return err
		}
		h.Mu.Lock()
		if h.Shutting.Load() {
			h.Mu.Unlock()
			_ = c.Close()
			continue
		}
		h.WG.Add(1)
		if len(h.Loops) > 0 {
			// The event loop takes a duplicate of the descriptor; the
			// accepted net.Conn is closed (the socket stays open).
			l := h.Loops[h.next%len(h.Loops)]
			h.next++
			if l.adopt(c) {
				h.Mu.Unlock()
				continue
			}
		}
		hc := &H1Conn{Conn: c}
		h.Conns[hc] = struct{}{}
		h.Mu.Unlock()
		go h.serveConn(hc)
	}
}

// isTemporary reports accept errors worth retrying (EMFILE and the like).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// forget drops hc from the registry (closed or handed off).
func (h *ConnServer) forget(hc *H1Conn) {
	h.Mu.Lock()
	delete(h.Conns, hc)
	h.Mu.Unlock()
	h.WG.Done()
}

// ForgetH2 unregisters a closed HTTP/2 connection (its drain count ends
// once its handlers have returned, h2srv.Config.Done).
func (h *ConnServer) ForgetH2(c *h2srv.Conn) {
	h.Mu.Lock()
	delete(h.H2Conns, c)
	h.Mu.Unlock()
}

// Shutdown stops serving: idle connections are closed at once, active ones
// after the response they are writing (which says Connection: close); it
// returns when none is left or ctx ends (then the rest are closed).
func (h *ConnServer) Shutdown(ctx context.Context) error {
	// Under mu: serve adds to wg under mu only while not shutting, so no
	// Add can race the Wait below.
	h.Mu.Lock()
	h.shutAt.Store(time.Now().UnixNano())
	h.Shutting.Store(true)
	h.Mu.Unlock()
	for _, l := range h.Loops {
		l.Wakeup(false) // closes its idle connections, then its others as they finish
	}
	done := make(chan struct{})
	go func() { h.WG.Wait(); close(done) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	defer func() {
		// Each loop exits once its last connection is gone.
		for _, l := range h.Loops {
			<-l.done
		}
	}()
	graced := make(map[*H1Conn]bool)
	hsGraced := make(map[*tls.Conn]bool)
	for {
		h.Mu.Lock()
		for c := range h.H2Conns {
			c.Drain(DrainIdleGrace) // once per connection
		}
		for tc := range h.Handshaking {
			if !hsGraced[tc] {
				hsGraced[tc] = true
				dl := time.Now().Add(drainHandshakeGrace)
				_ = tc.SetReadDeadline(dl)
				_ = tc.SetWriteDeadline(dl)
			}
		}
		for hc := range h.Conns {
			// An idle connection gets DrainIdleGrace to bring a request
			// (its read wakes then and the connection ends); one that
			// does is answered and closed after the response.
			if !graced[hc] && hc.state.Load() == h1Idle {
				graced[hc] = true
				_ = hc.Conn.SetReadDeadline(time.Now().Add(DrainIdleGrace))
			}
		}
		h.Mu.Unlock()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			for _, l := range h.Loops {
				l.Wakeup(true)
			}
			h.Mu.Lock()
			for hc := range h.Conns {
				hc.state.Store(h1Closed)
				_ = hc.Conn.Close()
			}
			for tc := range h.Handshaking {
				_ = tc.NetConn().Close()
			}
			for c := range h.H2Conns {
				c.CloseNow()
			}
			h.Mu.Unlock()
			<-done
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (h *ConnServer) serveConn(hc *H1Conn) { h.RunConn(hc, nil) }

// h1Resume is the work in progress of a connection an event loop gives up
// (evloop_linux.go): the rest of an answer to write, or an exchange to
// finish.
type h1Resume struct {
	// out is the rest of an answer the loop could not write whole; keep
	// reports whether the connection stays open after it.
	out  []byte
	keep bool
	// ex is a request the loop picked a backend for (hc.req, parsed from
	// hc.head) and could not finish.
	ex *Exchange
}

// Exchange is a picked request (counted in flight on b and in
// rt.metrics[i] since start) that a goroutine finishes: with err, the
// error page; with sent, reading the response from the backend connection
// the request was already written to (reused: it came from a pool); with
// neither, the whole exchange. rhLeft is what is left of the route's
// response header timeout (0: none).
type Exchange struct {
	Route   *HTTPRoute
	Index   int
	Backend *Backend
	Start   time.Time
	sent    *upstream.Conn
	reused  bool
	err     error
	rhLeft  time.Duration
	// retried is set once the request went to another instance after its
	// first failed (failover; at most once).
	retried bool
	// Acc is what the access log takes from the request (accesslog.go).
	Acc ExchangeAccess
}

// RunConn serves hc until it closes or is handed to net/http, first
// finishing res (nil: nothing in progress).
func (h *ConnServer) RunConn(hc *H1Conn, res *h1Resume) {
	c := hc.Conn
	hc.br = h1ReaderPool.Get().(*bufio.Reader)
	hc.br.Reset(c)
	hc.bw = h1WriterPool.Get().(*bufio.Writer)
	hc.bw.Reset(hc) // Write: the send timeout, then c
	hc.PeerInfo(c.RemoteAddr(), h.Core.Reg.Trusted)
	hc.Gone = func() bool { return PeerClosed(c) }
	hc.wait = hc.Wait
	handedOff := false
	defer func() {
		if !handedOff {
			_ = hc.bw.Flush() // responses held back for pipelined requests
			_ = c.Close()
		}
		hc.br.Reset(nil)
		h1ReaderPool.Put(hc.br)
		hc.bw.Reset(nil)
		h1WriterPool.Put(hc.bw)
		h.forget(hc)
	}()
	// The read deadline is moved only when it must be: the idle deadline is
	// re-armed once it has slipped by more than slack, and the read header
	// deadline is armed only when a request's head did not arrive whole
	// with its first byte (a trickling client). A steady keep-alive
	// connection thus costs no deadline update per request.
	var idleUntil time.Time // zero while the header deadline is armed
	slack := min(time.Second, h.IdleTimeout/10)
	if res != nil {
		keep := res.keep
		if res.ex != nil {
			keep = h.Core.finishH1(hc, res.ex)
		} else if _, err := hc.bw.Write(res.out); err != nil || !flushIdle(hc) {
			keep = false
		}
		if !keep || !hc.state.CompareAndSwap(h1Active, h1Idle) {
			return
		}
		hc.shrink()
	}
	for {
		if hc.br.Buffered() == 0 {
			idleUntil = h.armIdleRead(c, idleUntil, slack)
			if _, err := hc.br.Peek(1); err != nil {
				return
			}
		}
		if !hc.state.CompareAndSwap(h1Idle, h1Active) {
			return // closed by shutdown
		}
		if b, _ := hc.br.Peek(hc.br.Buffered()); !bytes.Contains(bytes.TrimLeft(b, "\r\n"), crlfcrlf) {
			idleUntil = time.Time{}
			_ = c.SetReadDeadline(time.Now().Add(h.ReadHeaderTimeout))
		}
		head, err := h1wire.ReadHead(hc.br, hc.head[:0], h1MaxHead, nil)
		hc.head = head
		if err != nil && !errors.Is(err, h1wire.ErrHeadTooLarge) {
			return // timeout, EOF or reset: net/http closes silently too
		}
		if err == nil && h1wire.ParseRequest(head, &hc.Req) {
			if served, keep := h.Core.serveH1(hc); served {
				if !keep {
					return
				}
				if !hc.state.CompareAndSwap(h1Active, h1Idle) {
					return
				}
				hc.shrink()
				continue
			}
		}
		// Not for the loop: net/http takes the connection from here, with
		// the bytes already read replayed first.
		prefix := make([]byte, 0, len(head)+hc.br.Buffered())
		prefix = append(prefix, head...)
		if n := hc.br.Buffered(); n > 0 {
			b, _ := hc.br.Peek(n)
			prefix = append(prefix, b...)
		}
		if hc.bw.Flush() != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		_ = c.SetWriteDeadline(time.Time{})
		if h.handoffFor(hc).Push(handoff.NewTrackedConn(&handoff.ReplayConn{Conn: c, Prefix: prefix})) {
			handedOff = true
		}
		return
	}
}

// armIdleRead sets c's read deadline for the wait between requests and
// returns the idle deadline armed (zero: none). The idle timeout is moved
// only once it has slipped by more than slack. During a drain an idle
// connection (its last answer went out keep-alive before the drain began)
// gets DrainIdleGrace for a request already on its way, as
// ConnServer.shutdown gives the connections idle when it begins; that
// request is answered with Connection: close.
func (h *ConnServer) armIdleRead(c net.Conn, idleUntil time.Time, slack time.Duration) time.Time {
	now := time.Now()
	switch {
	case h.Shutting.Load():
		_ = c.SetReadDeadline(now.Add(DrainIdleGrace))
		return time.Time{}
	case idleUntil.Sub(now) < h.IdleTimeout-slack:
		idleUntil = now.Add(h.IdleTimeout)
		_ = c.SetReadDeadline(idleUntil)
	}
	return idleUntil
}

// H1SendTimeout bounds how long a write to a client may make no progress
// (nginx's send_timeout): a client that stops reading its answer frees its
// goroutine and backend connection after 1-2 minutes instead of never.
// There is no bound on a whole response: long downloads and streams go on
// as long as the client reads.
const H1SendTimeout = 2 * time.Minute

// Write writes p to the client under the send timeout. The deadline is
// moved only once it is less than half of H1SendTimeout away, so a steady
// connection does not update it per request: a write may thus be cut after
// 1-2 minutes without progress.
func (hc *H1Conn) Write(p []byte) (int, error) {
	if now := time.Now(); hc.writeUntil.Sub(now) < H1SendTimeout/2 {
		hc.writeUntil = now.Add(H1SendTimeout)
		_ = hc.Conn.SetWriteDeadline(hc.writeUntil)
	}
	n, err := hc.Conn.Write(p)
	hc.sent += int64(n)
	return n, err
}

// shrink drops per-connection buffers a large request or response grew,
// so an idle keep-alive connection holds a few KiB, not what its largest
// request needed (up to 32 KiB of head and thousands of header slots).
func (hc *H1Conn) shrink() {
	const maxHead, maxHeaders = 8 << 10, 64
	if cap(hc.head) > maxHead {
		hc.head = nil
	}
	if cap(hc.rhead) > maxHead {
		hc.rhead = nil
	}
	if cap(hc.Req.Headers) > maxHeaders {
		hc.Req.Headers = nil
	}
	if cap(hc.Req.ConnNames) > maxHeaders {
		hc.Req.ConnNames = nil
	}
	if cap(hc.resp.Headers) > maxHeaders {
		hc.resp.Headers = nil
	}
	if cap(hc.resp.ConnNames) > maxHeaders {
		hc.resp.ConnNames = nil
	}
	hc.Req = h1wire.Request{Headers: hc.Req.Headers, ConnNames: hc.Req.ConnNames}
	hc.resp = h1wire.Response{Headers: hc.resp.Headers, ConnNames: hc.resp.ConnNames}
}

// PeerInfo records the client address and whether it is a trusted proxy.
func (hc *H1Conn) PeerInfo(addr net.Addr, trusted []netip.Prefix) {
	if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
		hc.PeerIP = ap.Addr().Unmap()
		hc.Peer = ap.Addr().String()
	} else {
		hc.Peer = addr.String()
		if i := strings.LastIndexByte(hc.Peer, ':'); i >= 0 {
			hc.Peer = hc.Peer[:i]
		}
	}
	if hc.PeerIP.IsValid() {
		for _, p := range trusted {
			if p.Contains(hc.PeerIP) {
				hc.Trusted = true
				break
			}
		}
	}
}
