package edgeproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The edge's own HTTP/1.1 connection loop (issue 5).
//
// net/http's server costs a background read goroutine, a cancelable
// context, a Request with a parsed URL and a Header map, and a
// ResponseWriter per request; on this hot path that was most of the gap to
// nginx. h1Server accepts the public connections itself and serves, on the
// connection's goroutine and without allocating per request, the requests
// that make up nearly all of an app's traffic: HTTP/1.1 GET and HEAD with
// no body and no upgrade, for a routed host, with well-formed headers. The
// request is written straight onto a pooled backend connection
// (fastTransport) and the response relayed as it comes (Content-Length
// bodies copied, chunked bodies passed through chunk by chunk with their
// trailers, bodies delimited by the backend closing re-chunked), flushed
// whenever the backend has nothing more buffered, so server-sent events
// pass as sent.
//
// Anything else (a body, an upgrade, Expect, HTTP/1.0, an unknown host, a
// header it does not fully accept, heads over 64 KiB) is handed off, at a
// request boundary, to the net/http server together with every byte read
// so far; the connection then stays with net/http (ServeHTTP, ReverseProxy)
// for the rest of its life, which answers malformed requests 400 and
// oversized heads 431 without reaching a backend.
//
// On Linux, event loops (evloop_linux.go) take the connections first and
// serve the simplest exchanges without a goroutine; a connection that
// asks for more is handed to runConn here, with the exchange in progress
// (h1Resume), and stays on its goroutine from then on.
//
// Timeouts match the net/http server's configuration: IdleTimeout between
// requests, ReadHeaderTimeout from the first byte of a request to the end
// of its head, no write timeout. A client that disconnects while its
// backend works is noticed within upstreamTick (a non-blocking peek at the
// client each time the backend read deadline passes), and the backend
// connection is closed, as net/http cancels the request's context.

// h1MaxHead bounds a request head served by the loop; a larger head goes to
// net/http with what was read, which answers 431 (maxRequestHead).
const h1MaxHead = maxRequestHead

var crlfcrlf = []byte("\r\n\r\n")

// h1MaxResponseHead bounds a backend's response head (502 beyond).
const h1MaxResponseHead = 1 << 20

// Connection states (h1Conn.state).
const (
	h1Idle int32 = iota
	h1Active
	h1Closed
)

var (
	errHeadTooLarge = errors.New("head too large")
	errBadResponse  = errors.New("malformed backend response")
)

// h1Server is the accept loop and connection registry of the public
// listener.
type h1Server struct {
	s                 *Server
	handoff           *handoffListener
	idleTimeout       time.Duration
	readHeaderTimeout time.Duration

	// loops are the event loops that serve connections while their
	// requests stay simple (evloop_linux.go); none: a goroutine per
	// connection from the start.
	loops []*evLoop
	next  int

	mu       sync.Mutex
	conns    map[*h1Conn]struct{}
	shutting atomic.Bool
	// shutAt is when shutdown began (unix nano): idle connections get
	// drainIdleGrace from then (or from going idle) to send a request.
	shutAt atomic.Int64
	wg     sync.WaitGroup
}

// drainIdleGrace is how long a drain leaves an idle client connection open
// for a request already on its way (a keep-alive client's next request, a
// new connection's first one): such a request is answered, with
// Connection: close, instead of the connection being closed under it.
const drainIdleGrace = 250 * time.Millisecond

// h1Conn is one client connection served by the loop.
type h1Conn struct {
	c     net.Conn
	state atomic.Int32
	br    *bufio.Reader
	bw    *bufio.Writer
	head  []byte
	req   h1Request
	// resp and rhead are the backend response of the current request.
	resp  h1Response
	rhead []byte
	// writeUntil is the client write deadline armed (h1SendTimeout).
	writeUntil time.Time
	// up is the backend connection of the current request, rhDeadline the
	// route's response header deadline (zero: none); wait is
	// upstreamWait, bound once per connection.
	up         *fastConn
	rhDeadline time.Time
	wait       func(error) error
	// Per-connection forwarded values (the peer does not change).
	peer    string
	peerIP  netip.Addr
	trusted bool
	// fwdHost/fwd cache the Forwarded element for the last Host seen.
	fwdHost string
	fwd     string
}

var (
	h1ReaderPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
	h1WriterPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
)

func newH1Server(s *Server, addr net.Addr, idleTimeout time.Duration) *h1Server {
	return &h1Server{
		s:                 s,
		handoff:           newHandoffListener(addr),
		idleTimeout:       idleTimeout,
		readHeaderTimeout: s.cfg.ReadHeaderTimeout,
		conns:             make(map[*h1Conn]struct{}),
	}
}

// serve accepts connections on ln until it is closed (returns nil) or fails
// for good.
func (h *h1Server) serve(ln net.Listener) error {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || h.shutting.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		h.mu.Lock()
		if h.shutting.Load() {
			h.mu.Unlock()
			_ = c.Close()
			continue
		}
		h.wg.Add(1)
		if len(h.loops) > 0 {
			// The event loop takes a duplicate of the descriptor; the
			// accepted net.Conn is closed (the socket stays open).
			l := h.loops[h.next%len(h.loops)]
			h.next++
			if l.adopt(c) {
				h.mu.Unlock()
				continue
			}
		}
		hc := &h1Conn{c: c}
		h.conns[hc] = struct{}{}
		h.mu.Unlock()
		go h.serveConn(hc)
	}
}

// isTemporary reports accept errors worth retrying (EMFILE and the like).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// forget drops hc from the registry (closed or handed off).
func (h *h1Server) forget(hc *h1Conn) {
	h.mu.Lock()
	delete(h.conns, hc)
	h.mu.Unlock()
	h.wg.Done()
}

// shutdown stops serving: idle connections are closed at once, active ones
// after the response they are writing (which says Connection: close); it
// returns when none is left or ctx ends (then the rest are closed).
func (h *h1Server) shutdown(ctx context.Context) error {
	// Under mu: serve adds to wg under mu only while not shutting, so no
	// Add can race the Wait below.
	h.mu.Lock()
	h.shutAt.Store(time.Now().UnixNano())
	h.shutting.Store(true)
	h.mu.Unlock()
	for _, l := range h.loops {
		l.wakeup(false) // closes its idle connections, then its others as they finish
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	defer func() {
		// Each loop exits once its last connection is gone.
		for _, l := range h.loops {
			<-l.done
		}
	}()
	graced := make(map[*h1Conn]bool)
	for {
		h.mu.Lock()
		for hc := range h.conns {
			// An idle connection gets drainIdleGrace to bring a request
			// (its read wakes then and the connection ends); one that
			// does is answered and closed after the response.
			if !graced[hc] && hc.state.Load() == h1Idle {
				graced[hc] = true
				_ = hc.c.SetReadDeadline(time.Now().Add(drainIdleGrace))
			}
		}
		h.mu.Unlock()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			for _, l := range h.loops {
				l.wakeup(true)
			}
			h.mu.Lock()
			for hc := range h.conns {
				hc.state.Store(h1Closed)
				_ = hc.c.Close()
			}
			h.mu.Unlock()
			<-done
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (h *h1Server) serveConn(hc *h1Conn) { h.runConn(hc, nil) }

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
	ex *h1Exchange
}

// h1Exchange is a picked request (counted in flight on b and in
// rt.metrics[i] since start) that a goroutine finishes: with err, the
// error page; with sent, reading the response from the backend connection
// the request was already written to (reused: it came from a pool); with
// neither, the whole exchange. rhLeft is what is left of the route's
// response header timeout (0: none).
type h1Exchange struct {
	rt     *httpRoute
	i      int
	b      *backend
	start  time.Time
	sent   *fastConn
	reused bool
	err    error
	rhLeft time.Duration
}

// runConn serves hc until it closes or is handed to net/http, first
// finishing res (nil: nothing in progress).
func (h *h1Server) runConn(hc *h1Conn, res *h1Resume) {
	c := hc.c
	hc.br = h1ReaderPool.Get().(*bufio.Reader)
	hc.br.Reset(c)
	hc.bw = h1WriterPool.Get().(*bufio.Writer)
	hc.bw.Reset(hc) // Write: the send timeout, then c
	hc.peerInfo(c.RemoteAddr(), h.s.reg.trusted)
	hc.wait = hc.upstreamWait
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
	slack := min(time.Second, h.idleTimeout/10)
	if res != nil {
		keep := res.keep
		if res.ex != nil {
			keep = h.s.finishH1(hc, res.ex)
		} else if _, err := hc.bw.Write(res.out); err != nil || !flushIdle(hc) {
			keep = false
		}
		if !keep || h.shutting.Load() || !hc.state.CompareAndSwap(h1Active, h1Idle) {
			return
		}
		hc.shrink()
	}
	for {
		if hc.br.Buffered() == 0 {
			if now := time.Now(); idleUntil.Sub(now) < h.idleTimeout-slack {
				idleUntil = now.Add(h.idleTimeout)
				_ = c.SetReadDeadline(idleUntil)
			}
			if _, err := hc.br.Peek(1); err != nil {
				return
			}
		}
		if !hc.state.CompareAndSwap(h1Idle, h1Active) {
			return // closed by shutdown
		}
		if b, _ := hc.br.Peek(hc.br.Buffered()); !bytes.Contains(bytes.TrimLeft(b, "\r\n"), crlfcrlf) {
			idleUntil = time.Time{}
			_ = c.SetReadDeadline(time.Now().Add(h.readHeaderTimeout))
		}
		head, err := readHead(hc.br, hc.head[:0], h1MaxHead, nil)
		hc.head = head
		if err != nil && !errors.Is(err, errHeadTooLarge) {
			return // timeout, EOF or reset: net/http closes silently too
		}
		if err == nil && parseRequest(head, &hc.req) {
			if served, keep := h.s.serveH1(hc); served {
				if !keep || h.shutting.Load() {
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
		if h.handoffFor(hc).push(newTrackedConn(&replayConn{Conn: c, prefix: prefix})) {
			handedOff = true
		}
		return
	}
}

// h1SendTimeout bounds how long a write to a client may make no progress
// (nginx's send_timeout): a client that stops reading its answer frees its
// goroutine and backend connection after 1-2 minutes instead of never.
// There is no bound on a whole response: long downloads and streams go on
// as long as the client reads.
const h1SendTimeout = 2 * time.Minute

// Write writes p to the client under the send timeout. The deadline is
// moved only once it is less than half of h1SendTimeout away, so a steady
// connection does not update it per request: a write may thus be cut after
// 1-2 minutes without progress.
func (hc *h1Conn) Write(p []byte) (int, error) {
	if now := time.Now(); hc.writeUntil.Sub(now) < h1SendTimeout/2 {
		hc.writeUntil = now.Add(h1SendTimeout)
		_ = hc.c.SetWriteDeadline(hc.writeUntil)
	}
	return hc.c.Write(p)
}

// shrink drops per-connection buffers a large request or response grew,
// so an idle keep-alive connection holds a few KiB, not what its largest
// request needed (up to 64 KiB of head and thousands of header slots).
func (hc *h1Conn) shrink() {
	const maxHead, maxHeaders = 8 << 10, 64
	if cap(hc.head) > maxHead {
		hc.head = nil
	}
	if cap(hc.rhead) > maxHead {
		hc.rhead = nil
	}
	if cap(hc.req.headers) > maxHeaders {
		hc.req.headers = nil
	}
	if cap(hc.req.connNames) > maxHeaders {
		hc.req.connNames = nil
	}
	if cap(hc.resp.headers) > maxHeaders {
		hc.resp.headers = nil
	}
	if cap(hc.resp.connNames) > maxHeaders {
		hc.resp.connNames = nil
	}
	hc.req = h1Request{headers: hc.req.headers, connNames: hc.req.connNames}
	hc.resp = h1Response{headers: hc.resp.headers, connNames: hc.resp.connNames}
}

// peerInfo records the client address and whether it is a trusted proxy.
func (hc *h1Conn) peerInfo(addr net.Addr, trusted []netip.Prefix) {
	if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
		hc.peerIP = ap.Addr().Unmap()
		hc.peer = ap.Addr().String()
	} else {
		hc.peer = addr.String()
		if i := strings.LastIndexByte(hc.peer, ':'); i >= 0 {
			hc.peer = hc.peer[:i]
		}
	}
	if hc.peerIP.IsValid() {
		for _, p := range trusted {
			if p.Contains(hc.peerIP) {
				hc.trusted = true
				break
			}
		}
	}
}

// readHead appends a message head (start line and header lines, through the
// empty line) from br to dst. It fails with errHeadTooLarge past limit
// bytes, with the read error otherwise, unless wait (non-nil) turns that
// error into nil: then it goes on reading where it stopped (bytes already
// read are never lost; see h1Conn.upstreamWait).
func readHead(br *bufio.Reader, dst []byte, limit int, wait func(error) error) ([]byte, error) {
	lineStart := len(dst)
	for {
		frag, err := br.ReadSlice('\n')
		dst = append(dst, frag...) // kept even when too large: a hand-off replays it
		if len(dst) > limit {
			return dst, errHeadTooLarge
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
type h1Header struct {
	name, value []byte
	kind        int // headerKind(name), from the parse
}

// h1Request is a request head the loop serves (slices into h1Conn.head).
type h1Request struct {
	method, uri, host []byte
	headers           []h1Header
	// connNames are the header names the Connection header lists; connSet
	// holds them when there are many (linear header checks).
	connNames [][]byte
	connSet   namedSet
	head      bool
	close     bool
	requestID bool
	teTrailer bool
}

// Header kinds the loop treats specially.
const (
	hdrOther = iota
	hdrHop
	hdrForwarded
	hdrHost
	hdrConnection
	hdrContentLength
	hdrTransferEncoding
	hdrUpgrade
	hdrExpect
	hdrRequestID
	hdrTE
	hdrTrailer
	// hdrClientClaim: a header naming the client or the scheme that the
	// edge does not set itself (clientClaimHeaders); dropped from an
	// untrusted peer.
	hdrClientClaim
	// hdrUnderscore: a name with underscores that reads as one of the
	// above with hyphens (underscoreAlias); never forwarded.
	hdrUnderscore
)

// clientClaimHeaders are headers backends commonly believe about the
// client (its address, the original scheme or port) besides the
// Forwarded / X-Forwarded-For/-Proto/-Host the edge sets: from a peer
// outside the trusted proxies they are removed, so a client cannot claim
// another address (issue 5: "an incoming chain is trusted only from
// configured trusted proxy CIDRs").
var clientClaimHeaders = []string{
	"X-Real-Ip", "X-Forwarded-Port", "X-Forwarded-Ssl", "X-Forwarded-Scheme",
	"X-Forwarded-Server", "X-Client-Ip", "True-Client-Ip", "X-Cluster-Client-Ip",
	"Cf-Connecting-Ip", "Fastly-Client-Ip",
}

// headerKind classifies a header name (case-insensitive).
func headerKind(name []byte) int {
	switch len(name) {
	case 2:
		if asciiEqualFold(name, "te") {
			return hdrTE
		}
	case 4:
		if asciiEqualFold(name, "host") {
			return hdrHost
		}
	case 6:
		if asciiEqualFold(name, "expect") {
			return hdrExpect
		}
	case 7:
		if asciiEqualFold(name, "upgrade") {
			return hdrUpgrade
		}
		if asciiEqualFold(name, "trailer") {
			return hdrTrailer
		}
	case 9:
		if asciiEqualFold(name, "forwarded") {
			return hdrForwarded
		}
		if asciiEqualFold(name, "x-real-ip") {
			return hdrClientClaim
		}
	case 11:
		if asciiEqualFold(name, "x-client-ip") {
			return hdrClientClaim
		}
	case 10:
		if asciiEqualFold(name, "connection") {
			return hdrConnection
		}
		if asciiEqualFold(name, "keep-alive") {
			return hdrHop
		}
	case 12:
		if asciiEqualFold(name, "x-request-id") {
			return hdrRequestID
		}
	case 14:
		if asciiEqualFold(name, "content-length") {
			return hdrContentLength
		}
		if asciiEqualFold(name, "true-client-ip") {
			return hdrClientClaim
		}
	case 15:
		if asciiEqualFold(name, "x-forwarded-for") {
			return hdrForwarded
		}
		if asciiEqualFold(name, "x-forwarded-ssl") {
			return hdrClientClaim
		}
	case 16:
		if asciiEqualFold(name, "x-forwarded-host") {
			return hdrForwarded
		}
		if asciiEqualFold(name, "proxy-connection") {
			return hdrHop
		}
		if asciiEqualFold(name, "x-forwarded-port") || asciiEqualFold(name, "cf-connecting-ip") ||
			asciiEqualFold(name, "fastly-client-ip") {
			return hdrClientClaim
		}
	case 17:
		if asciiEqualFold(name, "transfer-encoding") {
			return hdrTransferEncoding
		}
		if asciiEqualFold(name, "x-forwarded-proto") {
			return hdrForwarded
		}
	case 18:
		if asciiEqualFold(name, "proxy-authenticate") {
			return hdrHop
		}
		if asciiEqualFold(name, "x-forwarded-scheme") || asciiEqualFold(name, "x-forwarded-server") {
			return hdrClientClaim
		}
	case 19:
		if asciiEqualFold(name, "proxy-authorization") {
			return hdrHop
		}
		if asciiEqualFold(name, "x-cluster-client-ip") {
			return hdrClientClaim
		}
	}
	return hdrOther
}

// asciiEqualFold compares b with the lowercase ASCII string s.
func asciiEqualFold(b []byte, s string) bool {
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
// (see the package comment at h1.go); false hands the request to net/http.
func parseRequest(head []byte, req *h1Request) bool {
	*req = h1Request{headers: req.headers[:0], connNames: req.connNames[:0]}
	line, rest, ok := cutLine(head)
	if !ok {
		return false
	}
	switch {
	case bytes.HasPrefix(line, []byte("GET ")):
		req.method, line = line[:3], line[4:]
	case bytes.HasPrefix(line, []byte("HEAD ")):
		req.method, line = line[:4], line[5:]
		req.head = true
	default:
		return false
	}
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || string(line[sp+1:]) != "HTTP/1.1" {
		return false
	}
	req.uri = line[:sp]
	if !validRequestURI(req.uri) || bytes.HasPrefix(req.uri, acmeChallengePath) {
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
		if !validFieldValue(value) {
			return false
		}
		kind := headerKind(name)
		if kind == hdrOther && underscoreAlias(name) {
			kind = hdrUnderscore
		}
		switch kind {
		case hdrHost:
			hosts++
			req.host = value
			continue // written first, from req.host
		case hdrContentLength:
			if string(value) != "0" {
				return false
			}
			continue // a bodiless request needs none
		case hdrTransferEncoding, hdrUpgrade, hdrExpect:
			return false
		case hdrConnection:
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = bytes.Trim(tok, " \t")
				switch {
				case asciiEqualFold(tok, "close"):
					req.close = true
				case asciiEqualFold(tok, "keep-alive"), len(tok) == 0:
				default:
					req.connNames = append(req.connNames, tok)
				}
			}
		case hdrRequestID:
			if len(value) == 0 {
				continue // no id: one is added
			}
			req.requestID = true
		case hdrTE:
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				if asciiEqualFold(bytes.Trim(tok, " \t"), "trailers") {
					req.teTrailer = true
				}
			}
		}
		req.headers = append(req.headers, h1Header{name: name, value: value, kind: kind})
	}
	req.connSet = newNamedSet(req.connNames)
	if req.requestID && req.namedByConnection([]byte("X-Request-Id")) {
		req.requestID = false // dropped as hop-by-hop: one is added
	}
	return hosts == 1 && len(req.host) > 0 && validHost(req.host)
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
func validFieldValue(b []byte) bool {
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

// routeH1 resolves a Host header on snap without allocating for the common
// case (an exact, lowercase host).
func (s *Server) routeH1(snap *snapshot, host []byte) *httpRoute {
	h := host
	if i := bytes.LastIndexByte(h, ':'); i >= 0 && h[0] != '[' {
		h = h[:i]
	}
	if len(h) > 0 && h[len(h)-1] != '.' && bytesLower(h) {
		if r, ok := snap.exact[string(h)]; ok {
			return r
		}
		if len(snap.wildcards) == 0 {
			return nil
		}
	}
	return s.route(snap, string(host))
}

func bytesLower(b []byte) bool {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// serveH1 proxies hc.req. served is false when the host has no route (the
// request then goes to net/http, which answers 404); keep reports whether
// the connection can serve another request.
func (s *Server) serveH1(hc *h1Conn) (served, keep bool) {
	rt, i, b := s.pickFor(hc)
	if rt == nil {
		return false, false
	}
	return true, s.finishH1(hc, &h1Exchange{rt: rt, i: i, b: b, start: time.Now()})
}

// pickH1 picks the backend for a request to host and counts the request
// in flight on it and in its route's metrics (doneH1 undoes both); rt is
// nil when the host has no route.
func (s *Server) pickH1(host []byte) (rt *httpRoute, i int, b *backend) {
	for {
		snap := s.snap.Load()
		if snap == nil {
			return nil, 0, nil
		}
		rt = s.routeH1(snap, host)
		if rt == nil || len(rt.backends) == 0 || rt.slowPlain.Load() {
			return nil, 0, nil // ServeHTTP answers (404, redirect, h2c)
		}
		i = rt.pick()
		b = rt.backends[i]
		b.inFlight.Add(1)
		// As in ServeHTTP: counted while snap was still current, so a drain
		// that saw 0 after the next swap can never miss this request.
		if s.snap.Load() == snap {
			break
		}
		b.inFlight.Add(-1)
	}
	rt.metrics[i].inFlight.Inc()
	return rt, i, b
}

// finishH1 runs (or finishes) the exchange of hc.req picked as ex, answers
// the client and reports whether the connection can serve another request.
func (s *Server) finishH1(hc *h1Conn, ex *h1Exchange) bool {
	var code, proxyErr int
	var keep bool
	if ex.err != nil {
		code, proxyErr, keep = s.h1ProxyError(hc, ex.rt, ex.b, ex.err)
	} else {
		code, proxyErr, keep = s.exchangeH1(hc, ex)
	}
	// The backend exchange is over (its connection pooled or closed): the
	// request leaves the drain's count before the answer's last bytes are
	// flushed, so a client that has its whole answer never sees the
	// request still in flight (as with net/http, which counts down before
	// finishing the response).
	doneH1(ex, code, proxyErr)
	return keep && flushIdle(hc)
}

// doneH1 ends the count pickH1 began and records the request's status.
func doneH1(ex *h1Exchange, code, proxyErr int) {
	ex.b.inFlight.Add(-1)
	rm := ex.rt.metrics[ex.i]
	rm.observe(code, proxyErr, ex.start)
	rm.inFlight.Dec()
}

// exchangeH1 sends the request to b and relays the response; it returns
// the status relayed (or of the error page), the error class for the
// metrics and whether the client connection stays open.
func (s *Server) exchangeH1(hc *h1Conn, ex *h1Exchange) (code, proxyErr int, keep bool) {
	rt, b := ex.rt, ex.b
	t := b.transport
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		var fc *fastConn
		var reused bool
		var err error
		rh := rt.timeouts.responseHeader
		if ex.sent != nil {
			// Written by an event loop, which read what is replayed.
			fc, reused, ex.sent = ex.sent, ex.reused, nil
			if rh > 0 {
				rh = max(ex.rhLeft, time.Millisecond)
			}
		} else {
			if fc, reused, err = t.get(ctx, rt.timeouts.dial, attempt == 0); err != nil {
				return s.h1ProxyError(hc, rt, b, err)
			}
			hc.writeOutgoing(fc.bw)
			err = fc.bw.Flush()
		}
		resp := &hc.resp
		resp.started = false
		if err == nil {
			hc.armUpstream(fc, rh)
			err = readResponse(fc, resp, hc.req.head, hc.rhead, hc.wait)
			hc.rhead = resp.head[:0]
		}
		if err != nil {
			_ = fc.c.Close()
			if errors.Is(err, errClientGone) {
				// Nobody to answer; the backend sees its request canceled.
				return statusClientClosed, 0, false
			}
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			if reused && attempt == 0 && !timedOut && !resp.started {
				continue // a kept-alive connection the backend had closed
			}
			return s.h1ProxyError(hc, rt, b, err)
		}
		hc.headDone()
		keep = !hc.req.close && !s.h1.shutting.Load()
		ok, upstreamOK := relayResponse(hc, fc, resp, keep, s.reg.bufferPool)
		if upstreamOK && !resp.close {
			t.put(fc)
		} else {
			_ = fc.c.Close()
		}
		return resp.code, 0, keep && ok
	}
}

// h1ProxyError writes the 502/503/504 page for a failed exchange.
func (s *Server) h1ProxyError(hc *h1Conn, rt *httpRoute, b *backend, err error) (int, int, bool) {
	code, what := classifyProxyError(context.Background(), err)
	s.logger.Debug("proxy error", "backend", b.addr, "host", string(hc.req.host), "status", code, "error", err)
	body := proxyErrorBody(code, what, rt)
	keep := !hc.req.close && !s.h1.shutting.Load()
	bw := hc.bw
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(strconv.Itoa(code))
	bw.WriteByte(' ')
	bw.WriteString(http.StatusText(code))
	bw.WriteString("\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nContent-Length: ")
	bw.WriteString(strconv.Itoa(len(body)))
	if !keep {
		bw.WriteString("\r\nConnection: close")
	}
	bw.WriteString("\r\n\r\n")
	if !hc.req.head {
		bw.WriteString(body)
	}
	if err := bw.Flush(); err != nil {
		keep = false
	}
	return code, code, keep
}

// writeOutgoing writes the proxied request head: hop-by-hop headers and
// the ones Connection names dropped, Te: trailers kept, the forwarded
// headers replaced (or extended for a trusted peer, forwardedFor) and an
// X-Request-Id added when absent.
func (hc *h1Conn) writeOutgoing(bw *bufio.Writer) {
	req := &hc.req
	bw.Write(req.method)
	bw.WriteByte(' ')
	bw.Write(req.uri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.Write(req.host)
	bw.WriteString("\r\n")
	for _, h := range req.headers {
		switch h.kind {
		case hdrHop, hdrConnection, hdrForwarded, hdrTrailer, hdrUnderscore:
			continue
		case hdrClientClaim:
			if !hc.trusted {
				continue
			}
		case hdrTE:
			if req.teTrailer {
				bw.WriteString("Te: trailers\r\n")
			}
			continue
		}
		if req.namedByConnection(h.name) {
			continue
		}
		bw.Write(h.name)
		bw.WriteString(": ")
		bw.Write(h.value)
		bw.WriteString("\r\n")
	}
	if hc.trusted {
		f := hc.trustedForwarded()
		if f.xff != "" {
			writeHeader(bw, "X-Forwarded-For", f.xff)
		}
		writeHeader(bw, "Forwarded", f.fwd)
		writeHeader(bw, "X-Forwarded-Proto", f.proto)
		writeHeader(bw, "X-Forwarded-Host", f.host)
	} else {
		writeHeader(bw, "X-Forwarded-For", hc.peer)
		if hc.fwd == "" || string(req.host) != hc.fwdHost {
			hc.fwdHost = string(req.host)
			hc.fwd = forwardedElement(hc.peerIP, hc.peer, hc.fwdHost, hc.scheme())
		}
		writeHeader(bw, "Forwarded", hc.fwd)
		bw.WriteString("X-Forwarded-Proto: ")
		bw.WriteString(hc.scheme())
		bw.WriteString("\r\nX-Forwarded-Host: ")
		bw.Write(req.host)
		bw.WriteString("\r\n")
	}
	if !req.requestID {
		writeRequestID(bw)
	}
	bw.WriteString("\r\n")
}

func writeHeader(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

// trustedForwarded extends the incoming chain of a trusted peer (the rules
// of forwardedFor).
func (hc *h1Conn) trustedForwarded() forwarded {
	in := &http.Request{RemoteAddr: net.JoinHostPort(hc.peer, "0"), Host: string(hc.req.host), Header: http.Header{}, TLS: hc.tlsState()}
	for _, h := range hc.req.headers {
		if h.kind == hdrForwarded {
			in.Header.Add(string(h.name), string(h.value))
		}
	}
	return forwardedFor(in, []netip.Prefix{netip.PrefixFrom(hc.peerIP, hc.peerIP.BitLen())})
}

func (r *h1Request) namedByConnection(name []byte) bool {
	return namedBy(r.connNames, r.connSet, name)
}

// writeRequestID writes an X-Request-Id header of 32 random hex characters
// (appendRequestID, into the writer).
func writeRequestID(bw *bufio.Writer) {
	if bw.Available() < 64 {
		_ = bw.Flush()
	}
	// Appended into the writer's own buffer: no allocation.
	buf := append(bw.AvailableBuffer(), "X-Request-Id: "...)
	buf = appendRequestID(buf)
	buf = append(buf, "\r\n"...)
	_, _ = bw.Write(buf)
}

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

// armUpstream sets fc's read deadline for an exchange: the route's response
// header deadline or the next client check, whichever is first. For a
// timeout over 2 s the deadline is moved only when it is near, so most
// requests do not touch it.
func (hc *h1Conn) armUpstream(fc *fastConn, responseHeader time.Duration) {
	hc.up = fc
	now := time.Now()
	hc.rhDeadline = time.Time{}
	if responseHeader > 0 {
		hc.rhDeadline = now.Add(responseHeader)
		if responseHeader <= 2*upstreamTick {
			// Short: its own deadline. A longer one (the 60 s default) is
			// checked at the client checks, at most upstreamTick late, so
			// it costs no deadline update per request either.
			fc.setWatch(earliest(now.Add(upstreamTick), hc.rhDeadline))
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
func (hc *h1Conn) headDone() {
	hc.rhDeadline = time.Time{}
}

// upstreamWait judges an error from reading the backend: a deadline that
// is only a client check returns nil (read on) while the client is still
// connected, errClientGone when it is not; the route's response header
// deadline returns errResponseHeaderTimeout (504); any other error is
// returned as is.
func (hc *h1Conn) upstreamWait(err error) error {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	now := time.Now()
	if !hc.rhDeadline.IsZero() && !now.Before(hc.rhDeadline) {
		return errResponseHeaderTimeout
	}
	if peerClosed(hc.c) {
		return errClientGone
	}
	next := now.Add(upstreamTick)
	if !hc.rhDeadline.IsZero() {
		next = earliest(next, hc.rhDeadline)
	}
	hc.up.setWatch(next)
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
}) (ok, upstreamOK bool) {
	writeResponseHead(hc.bw, resp, keep)
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
// close" unless keep.
func writeResponseHead(bw *bufio.Writer, resp *h1Response, keep bool) {
	bw.WriteString("HTTP/1.1 ")
	bw.Write(resp.status)
	bw.WriteString("\r\n")
	for _, h := range resp.headers {
		k := h.kind
		if k == hdrHop || k == hdrUpgrade || k == hdrTE || k == hdrTrailer && !resp.chunked || resp.namedByConnection(h.name) {
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
	if !keep {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
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
		line, err := hc.upstreamLine(fc)
		if err != nil {
			return false, false
		}
		size := line
		if i := bytes.IndexByte(size, ';'); i >= 0 {
			size = size[:i]
		}
		n, ok := parseChunkSize(bytes.TrimRight(size, " \t"))
		if !ok || !validFieldValue(line) {
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
			if err = hc.wait(err); err != nil {
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

// replayConn is a connection handed to net/http: prefix (bytes the loop
// already read) is read first.
type replayConn struct {
	net.Conn
	prefix []byte
}

// CloseWrite lets net/http half-close before closing a connection it
// rejected (a 400 or 431 with unread input), so the client reads the answer
// instead of a reset.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// SyscallConn exposes the socket (peerClosed, fastConn.usable).
func (c *replayConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// handoffListener is the net.Listener the net/http server accepts handed-
// off connections from.
type handoffListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// push hands c to the net/http server; false (c untouched) once closed.
func (l *handoffListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}
