//go:build linux

package edgeproxy

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Event loops for the public listener (issue 5).
//
// A goroutine per connection on Go's poller costs, per proxied request, a
// read tried before every wait (one EAGAIN on the backend, one on the
// client), two goroutine parks and the scheduler's wake-ups: on a small
// machine that was the last ~10 % to nginx. An evLoop is one OS thread
// (runtime.LockOSThread) with its own edge-triggered epoll set that serves
// client connections while what they ask is simple, the way nginx's
// workers do: a socket is read only when epoll says it has data, a read
// shorter than the buffer means it is drained, and a pooled backend
// connection that gets an event while idle is known dead without a peek.
// Reads and writes are non-blocking raw system calls.
//
// The loop serves the common case whole: a request head that fits its
// 4 KiB buffer (one that comes in pieces waits in the loop, within the read
// header timeout) and that the goroutine path would serve itself
// (parseRequest),
// to a backend at a literal IP, whose answer is a final response with a
// Content-Length (or no body) of at most evMaxResponse bytes that the
// client accepts in one write. Anything else — a partial or odd head, a
// chunked, close-delimited or large answer, a 1xx, an error, a slow
// client — leaves the loop at that point: the connection (and the backend
// connection, with the bytes read from it) become net.Conns served by
// runConn on a goroutine, which finishes the exchange and keeps the
// connection from then on. The goroutine path is thus the reference for
// every behaviour; the loop only ever does what it would have done.
//
// Timeouts: keep-alive idle (IdleTimeout), dial and response header
// (per route) are checked by a sweep every evSweep; a client that closes
// or half-closes while its backend works is seen at once (EPOLLRDHUP) and
// the backend connection closed (499 in the metrics): like net/http and
// nginx, a half-close counts as an abort (the goroutine path sees it at its
// next check, within upstreamTick, so a faster answer still reaches it).

const (
	// evClientBuf is a client connection's read buffer: a head that does
	// not fit leaves the loop.
	evClientBuf = 4 << 10
	// evMaxResponse bounds an answer the loop buffers whole (head and
	// body); a larger one streams from a goroutine.
	evMaxResponse = 16 << 10
	// evSweep is how often timeouts are checked.
	evSweep = 250 * time.Millisecond
	// evMaxIdle bounds a loop's idle connections per backend.
	evMaxIdle = 256
	// evRawWait (ms) bounds a wait that keeps the thread's P (run).
	evRawWait = 5
)

// epoll data: Fd is the descriptor, Pad its kind (the low 2 bits) and
// the registration's serial number (the rest), so an event still queued
// for a descriptor closed earlier in the same batch is not taken for one
// that was given the same number since.
const (
	evTagClient int32 = iota
	evTagUp
	evTagWake
	evTagBits = 2
)

var errEvSend = errors.New("backend connection: request not written whole")

// evLoop is one event loop thread and the connections it owns. Only the
// loop's goroutine touches its fields, except inbox, force and the
// eventfd (adopt, wakeup).
type evLoop struct {
	h  *h1Server
	s  *Server
	ep int
	// wake is an eventfd that interrupts epoll_wait (adopt, wakeup).
	wake  int
	mu    sync.Mutex
	inbox []int
	dead  bool // under mu: the loop has exited (its eventfd is closed)
	// look asks for a sweep at the next wake-up; force closes everything.
	look  atomic.Bool
	force atomic.Bool

	clients map[int32]*evClient
	ups     map[int32]*evUp
	pools   map[*fastTransport][]*evUp
	events  []unix.EpollEvent
	// out collects a message before it is written; bw writes into it
	// (writeOutgoing and writeResponseHead take a *bufio.Writer).
	out       []byte
	bw        *bufio.Writer
	now       time.Time
	nextSweep time.Time
	// rawWait: the process has a P to spare beside the loops, so a loop
	// may wait a few milliseconds without handing its P over (run).
	rawWait bool
	serial  int32
	// done is closed when the loop has exited and closed everything.
	done chan struct{}
}

// nextSerial returns the epoll data Pad of a new registration of kind tag.
func (l *evLoop) nextSerial(tag int32) int32 {
	l.serial = (l.serial + 1) & (1<<(31-evTagBits) - 1)
	return l.serial<<evTagBits | tag
}

// evClient is a client connection in a loop.
type evClient struct {
	fd     int
	serial int32  // epoll data Pad
	hc     h1Conn // request, response, forwarded-header state
	buf    []byte
	n      int
	// eof: the client half-closed; close after what it sent is answered.
	eof bool
	// readable: data arrived while an exchange ran (edge-triggered: it
	// must be read later, no new event will say so).
	readable  bool
	idleSince time.Time
	// headSince is when the first byte of a head still in pieces came
	// (zero: none); the read header timeout runs from it.
	headSince time.Time
	// The exchange in progress (up != nil).
	up      *evUp
	ex      h1Exchange
	headLen int
	retried bool
	// rhDeadline is the route's response header deadline (zero: none).
	rhDeadline time.Time
}

// evUp is a backend connection in a loop.
type evUp struct {
	fd     int
	serial int32 // epoll data Pad
	t      *fastTransport
	c      *evClient // the client whose request it carries (nil: idle)
	buf    []byte
	n      int
	reused bool
	// connecting: a non-blocking connect not yet complete (dialDeadline).
	connecting   bool
	dialDeadline time.Time
	idleSince    time.Time
	closes       uint64 // t.closes when pooled
}

// evLoopCount is how many loops serve the public listener by default: one
// per four CPUs (at least one, at most eight). On a small machine the
// proxy shares the CPUs with its backends, and one loop that batches
// events beats two that each wake for fewer (measured: 2 loops on 2 CPUs
// did 0.8x one loop's throughput).
func evLoopCount(configured int) int {
	if configured != 0 {
		return max(configured, 0)
	}
	return min(max(runtime.NumCPU()/4, 1), 8)
}

// startLoops starts n event loops for h (none when one cannot be set up:
// the goroutine path serves everything, and the error is logged).
func (h *h1Server) startLoops(n int) {
	for range n {
		l, err := newEvLoop(h)
		if err != nil {
			h.s.logger.Warn("event loop unavailable; serving with a goroutine per connection", "error", err)
			break
		}
		h.loops = append(h.loops, l)
	}
	for _, l := range h.loops {
		l.rawWait = runtime.GOMAXPROCS(0) > len(h.loops)
		go l.run()
	}
}

func newEvLoop(h *h1Server) (*evLoop, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_ = unix.Close(ep)
		return nil, os.NewSyscallError("eventfd", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake), Pad: evTagWake}); err != nil {
		_ = unix.Close(ep)
		_ = unix.Close(wake)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	l := &evLoop{
		h: h, s: h.s, ep: ep, wake: wake,
		clients: make(map[int32]*evClient),
		ups:     make(map[int32]*evUp),
		pools:   make(map[*fastTransport][]*evUp),
		events:  make([]unix.EpollEvent, 256),
		done:    make(chan struct{}),
		out:     make([]byte, 0, evMaxResponse+1024),
	}
	l.bw = bufio.NewWriterSize((*evSink)(l), 4096)
	return l, nil
}

// evSink appends what l.bw flushes to l.out.
type evSink evLoop

func (w *evSink) Write(p []byte) (int, error) {
	w.out = append(w.out, p...)
	return len(p), nil
}

// adopt hands c's socket to the loop (a duplicate descriptor; c is
// closed). It reports false, c untouched, when the descriptor cannot be
// had; the caller then serves c itself. Called with h.mu held.
func (l *evLoop) adopt(c net.Conn) bool {
	fd := -1
	if !rawControl(c, func(s int) { fd, _ = unix.FcntlInt(uintptr(s), unix.F_DUPFD_CLOEXEC, 0) }) || fd < 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		_ = unix.Close(fd)
		return false
	}
	_ = c.Close()
	l.inbox = append(l.inbox, fd)
	l.signalLocked()
	return true
}

// wakeup makes the loop look at the shutdown state and its pools; force
// closes every connection it has, busy or not (shutdown timed out).
func (l *evLoop) wakeup(force bool) {
	if force {
		l.force.Store(true)
	}
	l.look.Store(true)
	l.mu.Lock()
	l.signalLocked()
	l.mu.Unlock()
}

func (l *evLoop) signalLocked() {
	if !l.dead {
		one := [8]byte{1}
		_, _ = unix.Write(l.wake, one[:])
	}
}

// run is the loop; it returns once the server shuts down and its last
// connection is gone.
func (l *evLoop) run() {
	runtime.LockOSThread()
	defer l.exit()
	l.now = time.Now()
	l.nextSweep = l.now.Add(evSweep)
	for {
		// Under load the next event is microseconds away: wait for it in
		// a raw system call, which keeps this thread's P (no hand-off to
		// another thread and back), when there is a P to spare for the
		// rest of the process; at most evRawWait, so an idle loop sleeps
		// in an ordinary (scheduler-aware) wait.
		ms := max(int(time.Until(l.nextSweep)/time.Millisecond), 0) + 1
		raw := 0
		if l.rawWait {
			raw = min(ms, evRawWait)
		}
		n, err := epollWaitRaw(l.ep, l.events, raw)
		if err == nil && n == 0 {
			n, err = unix.EpollWait(l.ep, l.events, ms)
		}
		if err != nil && err != unix.EINTR {
			l.s.logger.Error("event loop failed; closing its connections", "error", err)
			return
		}
		l.now = time.Now()
		for i := range max(n, 0) {
			ev := &l.events[i]
			switch ev.Pad & (1<<evTagBits - 1) {
			case evTagClient:
				if c := l.clients[ev.Fd]; c != nil && c.serial == ev.Pad {
					l.onClient(c, ev.Events)
				}
			case evTagUp:
				if u := l.ups[ev.Fd]; u != nil && u.serial == ev.Pad {
					l.onUp(u, ev.Events)
				}
			case evTagWake:
				var b [8]byte
				_, _ = unix.Read(l.wake, b[:])
				l.takeInbox()
				if l.look.Swap(false) {
					l.nextSweep = l.now // look at shutdown and the pools now
				}
			}
		}
		if !l.now.Before(l.nextSweep) {
			l.sweep()
		}
		if len(l.clients) == 0 && l.h.shutting.Load() {
			l.mu.Lock()
			empty := len(l.inbox) == 0
			l.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

// exit closes everything the loop still has.
func (l *evLoop) exit() {
	l.takeInbox()
	for _, c := range l.clients {
		l.closeClient(c, statusClientClosed)
	}
	for _, u := range l.ups {
		l.closeUp(u)
	}
	l.mu.Lock()
	l.dead = true
	fds := l.inbox
	l.inbox = nil
	l.mu.Unlock()
	for _, fd := range fds {
		_ = unix.Close(fd)
		l.h.wg.Done()
	}
	_ = unix.Close(l.ep)
	_ = unix.Close(l.wake)
	runtime.UnlockOSThread()
	close(l.done)
}

func (l *evLoop) takeInbox() {
	l.mu.Lock()
	fds := l.inbox
	l.inbox = nil
	l.mu.Unlock()
	for _, fd := range fds {
		l.addClient(fd)
	}
}

func (l *evLoop) addClient(fd int) {
	c := &evClient{fd: fd, idleSince: l.now, serial: l.nextSerial(evTagClient)}
	sa, err := unix.Getpeername(fd)
	if err == nil {
		c.hc.peerInfo(sockaddrAddr(sa), l.s.reg.trusted)
	}
	if err != nil || unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{
		Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd), Pad: c.serial,
	}) != nil {
		_ = unix.Close(fd)
		l.h.wg.Done()
		return
	}
	l.clients[int32(fd)] = c
}

func sockaddrAddr(sa unix.Sockaddr) net.Addr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	}
	return &net.TCPAddr{}
}

// onClient handles events of a client connection.
func (l *evLoop) onClient(c *evClient, ev uint32) {
	if c.up != nil {
		if ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
			// Gone (or half-closed, which net/http also takes as gone)
			// while its backend works: nobody reads an answer.
			l.closeUp(c.up)
			c.up = nil
			doneH1(&c.ex, statusClientClosed, 0)
			l.closeClient(c, 0)
			return
		}
		c.readable = true
		return
	}
	if ev&(unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		l.closeClient(c, 0)
		return
	}
	if ev&unix.EPOLLRDHUP != 0 {
		c.eof = true
	}
	l.readClient(c)
}

// readClient reads what the client sent and serves it.
func (l *evLoop) readClient(c *evClient) {
	if c.buf == nil {
		c.buf = make([]byte, evClientBuf)
	}
	c.readable = false
	for {
		if c.n == len(c.buf) {
			// Full, not drained: no new event will tell of what is
			// still in the socket, so read again once there is room.
			c.readable = true
			break
		}
		m, err := rawRead(c.fd, c.buf[c.n:])
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			l.closeClient(c, 0)
			return
		}
		if m == 0 {
			c.eof = true
			break
		}
		space := len(c.buf) - c.n
		c.n += m
		if m < space {
			break // drained: epoll reports the next bytes
		}
	}
	l.serveClient(c)
}

// serveClient starts the exchange of the request at the start of c.buf,
// or waits for one, or gives the connection up.
func (l *evLoop) serveClient(c *evClient) {
	if c.n == 0 {
		if c.eof {
			l.closeClient(c, 0)
			return
		}
		c.idleSince = l.now
		return
	}
	end := bytes.Index(c.buf[:c.n], crlfcrlf)
	if end < 0 && c.buf[0] != '\r' && c.buf[0] != '\n' {
		b := c.buf[:c.n]
		switch {
		case c.eof:
			l.closeClient(c, 0) // a head cut by the client
		case c.n == len(c.buf) || bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\n\r\n")):
			// Larger than the loop takes, or ended by bare LFs: the
			// goroutine reads it.
			c.headSince = time.Time{}
			l.giveUp(c, nil, b)
		default:
			// A head in pieces waits here, holding only its buffer, within
			// the read header timeout from its first byte (sweep).
			if c.headSince.IsZero() {
				c.headSince = l.now
				l.sweepBy(l.now.Add(l.h.readHeaderTimeout))
			}
		}
		return
	}
	c.headSince = time.Time{}
	if end < 0 {
		l.giveUp(c, nil, c.buf[:c.n]) // leading empty lines
		return
	}
	head := c.buf[:end+4]
	if !parseRequest(head, &c.hc.req) {
		l.giveUp(c, nil, c.buf[:c.n])
		return
	}
	rt, i, b := l.s.pickH1(c.hc.req.host)
	if rt == nil {
		l.giveUp(c, nil, c.buf[:c.n]) // net/http answers 404
		return
	}
	c.ex = h1Exchange{rt: rt, i: i, b: b, start: l.now}
	c.headLen = len(head)
	c.retried = false
	if !b.transport.loopAddr.IsValid() {
		l.giveUpExchange(c, nil)
		return
	}
	l.startExchange(c)
}

// startExchange writes c's request to an idle backend connection, or
// dials one.
func (l *evLoop) startExchange(c *evClient) {
	rt := c.ex.rt
	c.rhDeadline = time.Time{}
	t := c.ex.b.transport
	var u *evUp
	if !c.retried {
		// A retry dials: the pool's other connections may be as dead as
		// the one that failed (a backend that closed them all).
		u = l.idle(t)
	}
	if u == nil {
		var err error
		if u, err = l.dial(t, rt.timeouts.dial); err != nil {
			c.ex.err = err
			l.giveUpExchange(c, nil)
			return
		}
	}
	u.c, c.up = c, u
	if !u.connecting {
		l.send(c)
	}
}

// idle returns a pooled connection to t, or nil.
func (l *evLoop) idle(t *fastTransport) *evUp {
	pool := l.pools[t]
	for len(pool) > 0 {
		u := pool[len(pool)-1]
		pool[len(pool)-1] = nil
		pool = pool[:len(pool)-1]
		if u.closes == t.closes.Load() && l.now.Sub(u.idleSince) < t.idleTimeout {
			l.pools[t] = pool
			u.reused = true
			return u
		}
		l.closeUp(u)
	}
	l.pools[t] = pool
	return nil
}

// dial starts a non-blocking connect to t (timeout: the route's dial
// timeout or the transport's).
func (l *evLoop) dial(t *fastTransport, timeout time.Duration) (*evUp, error) {
	ap := t.loopAddr
	family := unix.AF_INET
	var sa unix.Sockaddr
	if ap.Addr().Unmap().Is4() {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}
	} else {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", err)}
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	u := &evUp{fd: fd, t: t, serial: l.nextSerial(evTagUp)}
	if err := unix.Connect(fd, sa); err != nil {
		if err != unix.EINPROGRESS {
			_ = unix.Close(fd)
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: os.NewSyscallError("connect", err)}
		}
		u.connecting = true
		if timeout <= 0 {
			timeout = t.dialer.Timeout
		}
		u.dialDeadline = l.now.Add(timeout)
		l.sweepBy(u.dialDeadline)
	}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{
		Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd), Pad: u.serial,
	}); err != nil {
		_ = unix.Close(fd)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("epoll_ctl", err)}
	}
	l.ups[int32(fd)] = u
	return u, nil
}

// send writes c's request head to its backend connection.
func (l *evLoop) send(c *evClient) {
	u := c.up
	l.out = l.out[:0]
	l.bw.Reset((*evSink)(l))
	c.hc.writeOutgoing(l.bw)
	_ = l.bw.Flush()
	m, err := rawWrite(u.fd, l.out)
	if err != nil || m != len(l.out) {
		// A kept-alive connection the backend closed, or (never seen: the
		// send buffer of an idle connection is empty) a short write.
		l.closeUp(u)
		c.up = nil
		if err == nil {
			err = errEvSend
		}
		c.ex.err = &net.OpError{Op: "write", Net: "tcp", Err: err}
		l.retryOrGiveUp(c, u.reused)
		return
	}
	// The response header timeout runs from the request written (as
	// exchangeH1 arms it).
	if d := c.ex.rt.timeouts.responseHeader; d > 0 {
		c.rhDeadline = l.now.Add(d)
		l.sweepBy(c.rhDeadline)
	}
}

// retryOrGiveUp retries a request whose reused backend connection failed
// before any answer once on another connection (GET and HEAD are
// idempotent), as exchangeH1 does; otherwise the goroutine answers the
// error page.
func (l *evLoop) retryOrGiveUp(c *evClient, reused bool) {
	if reused && !c.retried {
		c.retried = true
		c.ex.err = nil
		l.startExchange(c)
		return
	}
	l.giveUpExchange(c, nil)
}

// onUp handles events of a backend connection.
func (l *evLoop) onUp(u *evUp, ev uint32) {
	c := u.c
	if c == nil {
		// Idle: bytes or a close from the backend. Either way it cannot
		// carry a request any more (unsolicited bytes would be read as the
		// next client's answer).
		if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
			l.unpool(u)
			l.closeUp(u)
		}
		return
	}
	if u.connecting {
		if ev&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
			return
		}
		u.connecting = false
		if errno, err := unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || errno != 0 {
			if err == nil {
				err = unix.Errno(errno)
			}
			l.closeUp(u)
			c.up = nil
			c.ex.err = &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(u.t.loopAddr), Err: os.NewSyscallError("connect", err)}
			l.giveUpExchange(c, nil)
			return
		}
		l.send(c)
		if c.up != u {
			return // the write failed: retried elsewhere or given up
		}
		// Fall through: an answer that came with the connect completion
		// (a backend that speaks first) was in this same event.
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		l.readUp(u, ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0)
	}
}

// readUp reads the answer and, once it is whole, relays it. hup says the
// event also reported the backend's close (or an error): then a short read
// does not mean drained, the socket is read on to its end of file, which
// no later event would report (edge-triggered), so a backend that writes
// part of an answer and closes at once gets its 502 or truncated body.
func (l *evLoop) readUp(u *evUp, hup bool) {
	c := u.c
	if u.buf == nil {
		u.buf = make([]byte, evMaxResponse)
	}
	var rerr error
	drained := false
	for u.n < len(u.buf) {
		m, err := rawRead(u.fd, u.buf[u.n:])
		if err == unix.EAGAIN {
			drained = true
			break
		}
		if err != nil {
			rerr = os.NewSyscallError("read", err)
			break
		}
		if m == 0 {
			rerr = io.EOF
			break
		}
		space := len(u.buf) - u.n
		u.n += m
		if m < space && !hup {
			drained = true
			break
		}
	}
	if u.n == 0 {
		if rerr == nil {
			return
		}
		// Closed before any answer: a kept-alive connection the backend
		// had closed (retried once), or a failed backend.
		l.closeUp(u)
		c.up = nil
		c.ex.err = &net.OpError{Op: "read", Net: "tcp", Err: rerr}
		if errors.Is(rerr, io.EOF) {
			c.ex.err = io.ErrUnexpectedEOF
		}
		l.retryOrGiveUp(c, u.reused)
		return
	}
	buf := u.buf[:u.n]
	headLen := headEnd(buf)
	if headLen < 0 {
		if rerr != nil || u.n == len(u.buf) {
			l.giveUpExchange(c, u) // the goroutine reads (or rejects) the rest
		}
		return
	}
	resp := &c.hc.resp
	if headLen == 0 || parseResponse(buf[:headLen], resp, c.hc.req.head) != nil || resp.code < 200 ||
		resp.code == 101 || resp.chunked || resp.untilClose {
		l.giveUpExchange(c, u)
		return
	}
	c.rhDeadline = time.Time{} // the head came: no response header timeout any more
	total := headLen
	if !resp.noBody {
		if resp.length > int64(len(u.buf)-total) {
			l.giveUpExchange(c, u) // large: streamed by a goroutine
			return
		}
		total += int(resp.length)
	}
	if u.n < total {
		if rerr != nil {
			l.giveUpExchange(c, u)
		}
		return // the rest of the body is coming
	}
	// Reused only when nothing followed the answer: the socket was
	// drained and held no more than the answer.
	reusable := rerr == nil && drained && !resp.close && u.n == total
	keep := !c.hc.req.close && !l.h.shutting.Load()
	l.out = l.out[:0]
	l.bw.Reset((*evSink)(l))
	writeResponseHead(l.bw, resp, keep)
	_ = l.bw.Flush()
	if !resp.noBody {
		l.out = append(l.out, buf[headLen:total]...)
	}
	// Out of the drain's count before the client has its answer (as the
	// goroutine path does).
	doneH1(&c.ex, resp.code, 0)
	c.up = nil
	if reusable {
		l.pool(u)
	} else {
		l.closeUp(u)
	}
	c.hc.resp = h1Response{headers: resp.headers[:0], connNames: resp.connNames[:0]}
	l.s.metrics.loopRequests.Inc()
	l.answered(c, keep)
}

// headEnd returns the length of the message head at the start of b,
// through its empty line (lines end in CRLF or a bare LF, as readHead
// reads them), or -1 when b holds no whole head; 0 when b starts with an
// empty line (left to readHead).
func headEnd(b []byte) int {
	start := 0
	for {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			return -1
		}
		line := b[start : start+i]
		if len(line) == 0 || len(line) == 1 && line[0] == '\r' {
			if start == 0 {
				return 0
			}
			return start + i + 1
		}
		start += i + 1
	}
}

// answered writes l.out (a whole answer) to c and goes on with c's next
// request.
func (l *evLoop) answered(c *evClient, keep bool) {
	m, err := rawWrite(c.fd, l.out)
	if err == unix.EAGAIN {
		m, err = 0, nil
	}
	if err != nil {
		l.closeClient(c, 0)
		return
	}
	// The request is done: what follows its head is the next one.
	c.n = copy(c.buf, c.buf[c.headLen:c.n])
	c.headLen = 0
	if m < len(l.out) {
		// The client is not reading fast enough: a goroutine writes the
		// rest under the send timeout.
		l.giveUp(c, &h1Resume{out: append([]byte(nil), l.out[m:]...), keep: keep}, c.buf[:c.n])
		return
	}
	if !keep {
		l.closeClient(c, 0)
		return
	}
	if c.readable {
		l.readClient(c)
		return
	}
	l.serveClient(c)
}

// pool keeps u for t's next request in this loop.
func (l *evLoop) pool(u *evUp) {
	u.c = nil
	u.n = 0
	u.reused = false
	t := u.t
	if t.retired.Load() || len(l.pools[t]) >= evMaxIdle {
		l.closeUp(u)
		return
	}
	u.idleSince = l.now
	u.closes = t.closes.Load()
	l.pools[t] = append(l.pools[t], u)
}

// unpool drops u from its pool.
func (l *evLoop) unpool(u *evUp) {
	pool := l.pools[u.t]
	for i, v := range pool {
		if v == u {
			pool[i] = pool[len(pool)-1]
			pool[len(pool)-1] = nil
			l.pools[u.t] = pool[:len(pool)-1]
			return
		}
	}
}

func (l *evLoop) closeUp(u *evUp) {
	if u.fd >= 0 {
		delete(l.ups, int32(u.fd))
		_ = unix.Close(u.fd)
		u.fd = -1
	}
}

// closeClient closes c; code, when not 0, is recorded for an exchange in
// progress (shutdown cut it).
func (l *evLoop) closeClient(c *evClient, code int) {
	if c.up != nil {
		l.closeUp(c.up)
		c.up = nil
		doneH1(&c.ex, cmp.Or(code, statusClientClosed), 0)
	}
	delete(l.clients, int32(c.fd))
	_ = unix.Close(c.fd)
	c.fd = -1
	l.h.wg.Done()
}

// giveUpExchange hands c, with its exchange in progress, to a goroutine:
// u (when not nil) is the backend connection the request was written to,
// with what it answered so far replayed to the goroutine.
func (l *evLoop) giveUpExchange(c *evClient, u *evUp) {
	ex := c.ex
	if u != nil {
		c.up = nil
		fc, err := l.release(u.fd, u.buf[:u.n])
		delete(l.ups, int32(u.fd))
		u.fd = -1
		if err != nil {
			ex.err = err
		} else {
			ex.sent, ex.reused = fc, u.reused
			if !c.rhDeadline.IsZero() {
				ex.rhLeft = c.rhDeadline.Sub(l.now)
				if ex.rhLeft <= 0 {
					_ = fc.c.Close()
					ex.sent, ex.err = nil, errResponseHeaderTimeout
				}
			}
		}
	}
	head := append([]byte(nil), c.buf[:c.headLen]...)
	c.hc.head = head
	l.giveUp(c, &h1Resume{ex: &ex}, c.buf[c.headLen:c.n])
}

// release takes fd out of the loop as a net.Conn (on Go's poller) that
// replays prefix first.
func (l *evLoop) release(fd int, prefix []byte) (*fastConn, error) {
	_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, fd, nil)
	f := os.NewFile(uintptr(fd), "")
	nc, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		return nil, err
	}
	var conn net.Conn = nc
	if len(prefix) > 0 {
		conn = &replayConn{Conn: nc, prefix: append([]byte(nil), prefix...)}
	}
	return newFastConn(conn), nil
}

// giveUp hands client connection c to a goroutine (runConn), which
// finishes res (nil: nothing in progress) and serves the connection from
// then on, reading prefix first.
func (l *evLoop) giveUp(c *evClient, res *h1Resume, prefix []byte) {
	l.s.metrics.loopHandoffs.Inc()
	delete(l.clients, int32(c.fd))
	fc, err := l.release(c.fd, prefix)
	c.fd = -1
	if err != nil {
		l.s.logger.Warn("event loop: cannot hand a connection over", "error", err)
		if res != nil && res.ex != nil {
			if res.ex.sent != nil {
				_ = res.ex.sent.c.Close()
			}
			doneH1(res.ex, statusClientClosed, 0)
		}
		l.h.wg.Done()
		return
	}
	if l.force.Load() {
		// Shutdown ran out of time: h1Server.shutdown has made its last
		// pass over h.conns; a connection registered now would be missed.
		_ = fc.c.Close()
		if res != nil && res.ex != nil {
			if res.ex.sent != nil {
				_ = res.ex.sent.c.Close()
			}
			doneH1(res.ex, statusClientClosed, 0)
		}
		l.h.wg.Done()
		return
	}
	hc := &h1Conn{c: fc.c}
	if res != nil && res.ex != nil {
		hc.head = c.hc.head
		if !parseRequest(hc.head, &hc.req) {
			panic("edgeproxy: a request the loop parsed does not parse again")
		}
	}
	if res != nil {
		hc.state.Store(h1Active)
	}
	if c.eof && res == nil && len(prefix) == 0 {
		_ = fc.c.Close()
		l.h.wg.Done()
		return
	}
	h := l.h
	h.mu.Lock()
	h.conns[hc] = struct{}{} // counted in h.wg since it was adopted
	h.mu.Unlock()
	go h.runConn(hc, res)
}

// sweepBy makes the next sweep happen no later than t (a deadline).
func (l *evLoop) sweepBy(t time.Time) {
	if t.Before(l.nextSweep) {
		l.nextSweep = t
	}
}

// sweep closes timed-out connections: idle clients (IdleTimeout),
// backends past their dial or response header deadline, pooled
// connections past their idle timeout or retired; on shutdown every idle
// client, and on a forced one everything.
func (l *evLoop) sweep() {
	shutting, force := l.h.shutting.Load(), l.force.Load()
	l.nextSweep = l.now.Add(evSweep)
	var graceFrom time.Time
	if shutting {
		graceFrom = time.Unix(0, l.h.shutAt.Load())
	}
	for _, c := range l.clients {
		if c.up == nil {
			if !c.headSince.IsZero() {
				// A partial head: the read header timeout, not the idle
				// one (closed silently, as net/http does).
				if shutting || force || l.now.Sub(c.headSince) >= l.h.readHeaderTimeout {
					l.closeClient(c, 0)
				} else {
					l.sweepBy(c.headSince.Add(l.h.readHeaderTimeout))
				}
				continue
			}
			// On shutdown an idle client gets drainIdleGrace (from the
			// shutdown or from going idle, whichever is later) for a
			// request already on its way.
			drainDue := false
			if shutting {
				due := graceFrom
				if c.idleSince.After(due) {
					due = c.idleSince
				}
				due = due.Add(drainIdleGrace)
				if drainDue = !l.now.Before(due); !drainDue {
					l.sweepBy(due)
				}
			}
			if drainDue || force || l.now.Sub(c.idleSince) >= l.h.idleTimeout {
				l.closeClient(c, 0)
			} else if c.n == 0 && l.now.Sub(c.idleSince) >= evSweep {
				c.buf = nil // an idle connection holds no buffer
			}
			continue
		}
		u := c.up
		switch {
		case force:
			l.closeClient(c, statusClientClosed)
		case u.connecting && !l.now.Before(u.dialDeadline):
			l.closeUp(u)
			c.up = nil
			c.ex.err = &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(u.t.loopAddr), Err: os.ErrDeadlineExceeded}
			l.giveUpExchange(c, nil)
		case !c.rhDeadline.IsZero() && !l.now.Before(c.rhDeadline):
			l.closeUp(u)
			c.up = nil
			c.ex.err = errResponseHeaderTimeout
			l.giveUpExchange(c, nil)
		default:
			if u.connecting {
				l.sweepBy(u.dialDeadline)
			}
			if !c.rhDeadline.IsZero() {
				l.sweepBy(c.rhDeadline)
			}
		}
	}
	for t, pool := range l.pools {
		keep := pool[:0]
		for _, u := range pool {
			if shutting || t.retired.Load() || u.closes != t.closes.Load() || l.now.Sub(u.idleSince) >= t.idleTimeout {
				l.closeUp(u)
				continue
			}
			if l.now.Sub(u.idleSince) >= evSweep {
				u.buf = nil
			}
			keep = append(keep, u)
		}
		clear(pool[len(keep):])
		if len(keep) == 0 {
			delete(l.pools, t)
		} else {
			l.pools[t] = keep
		}
	}
}

// Raw system calls skip the scheduler's entersyscall/exitsyscall: reads
// and writes of non-blocking descriptors never block, and epollWaitRaw
// blocks for at most a few milliseconds (a signal, such as the runtime's
// preemption, ends it early with EINTR).

func epollWaitRaw(ep int, evs []unix.EpollEvent, ms int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(ep), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), uintptr(ms), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func rawRead(fd int, p []byte) (int, error) { return rawRW(unix.SYS_READ, fd, p) }

func rawWrite(fd int, p []byte) (int, error) { return rawRW(unix.SYS_WRITE, fd, p) }

func rawRW(trap uintptr, fd int, p []byte) (int, error) {
	r, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
