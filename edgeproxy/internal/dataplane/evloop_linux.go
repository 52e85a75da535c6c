//go:build linux

package dataplane

import (
	"bufio"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/evloop"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// Event loops for the public listener.
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
// Content-Length (or no body) of at most EvMaxResponse bytes that the
// client accepts in one write. Anything else — a partial or odd head, a
// chunked, close-delimited or large answer, a 1xx, an error, a slow
// client — leaves the loop at that point: the connection (and the backend
// connection, with the bytes read from it) become net.Conns served by
// RunConn on a goroutine, which finishes the exchange and keeps the
// connection from then on. The goroutine path is thus the reference for
// every behaviour; the loop only ever does what it would have done.
//
// Timeouts: keep-alive idle (IdleTimeout), dial and response header
// (per route) are checked by a sweep every evSweep; a client that closes
// or half-closes while its backend works is seen at once (EPOLLRDHUP) and
// the backend connection closed (499 in the metrics): like net/http and
// nginx, a half-close counts as an abort (the goroutine path sees it at its
// next check, within upstream.Tick, so a faster answer still reaches it).

const (
	// evClientBuf is a client connection's read buffer: a head that does
	// not fit leaves the loop.
	evClientBuf = 4 << 10
	// EvMaxResponse bounds an answer the loop buffers whole (head and
	// body); a larger one streams from a goroutine.
	EvMaxResponse = 16 << 10
	// evSweep is how often timeouts are checked.
	evSweep = 250 * time.Millisecond
	// evMaxIdle bounds a loop's idle connections per backend.
	evMaxIdle = 256
	// evRawWait (ms) bounds a wait that keeps the thread's P (run).
	evRawWait = 5
)

// evLoop is one event loop thread and the connections it owns. Only the
// loop's goroutine touches its fields, except look, force and the poller's
// inbox and eventfd (adopt, wakeup).
type evLoop struct {
	h *ConnServer
	s *Core
	// p is the epoll set, its registrations, inbox and wake-ups.
	p *evloop.Poller
	// look asks for a sweep at the next wake-up; force closes everything.
	look  atomic.Bool
	force atomic.Bool

	clients map[int32]*evClient
	ups     map[int32]*evUp
	pools   map[*upstream.Transport][]*evUp
	// out collects a message before it is written; bw writes into it
	// (WriteOutgoing and writeResponseHead take a *bufio.Writer).
	out       []byte
	bw        *bufio.Writer
	now       time.Time
	nextSweep time.Time
	// rawWait: the process has a P to spare beside the loops, so a loop
	// may wait a few milliseconds without handing its P over (run).
	rawWait bool
	// done is closed when run has returned and closed everything.
	done chan struct{}
}

// evClient is a client connection in a loop.
type evClient struct {
	fd     int
	serial int32  // epoll data Pad
	hc     H1Conn // request, response, forwarded-header state
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
	ex      Exchange
	headLen int
	retried bool
	// rhDeadline is the route's response header deadline (zero: none).
	rhDeadline time.Time
}

// evUp is a backend connection in a loop.
type evUp struct {
	fd     int
	serial int32 // epoll data Pad
	t      *upstream.Transport
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

// EvLoopCount is how many loops serve the public listener by default: one
// per four CPUs (at least one, at most eight). On a small machine the
// proxy shares the CPUs with its backends, and one loop that batches
// events beats two that each wake for fewer (measured: 2 loops on 2 CPUs
// did 0.8x one loop's throughput).
func EvLoopCount(configured int) int {
	if configured != 0 {
		return max(configured, 0)
	}
	return min(max(runtime.NumCPU()/4, 1), 8)
}

// StartLoops starts n event loops for h (none when one cannot be set up:
// the goroutine path serves everything, and the error is logged).
func (h *ConnServer) StartLoops(n int) {
	for range n {
		l, err := newEvLoop(h)
		if err != nil {
			h.Core.Logger.Warn("event loop unavailable; serving with a goroutine per connection", "error", err)
			break
		}
		h.Loops = append(h.Loops, l)
	}
	for _, l := range h.Loops {
		l.rawWait = runtime.GOMAXPROCS(0) > len(h.Loops)
		// done is closed once run has returned, so a Run that waited for
		// it leaves no frame of the loop behind.
		go func() {
			l.run()
			close(l.done)
		}()
	}
}

func newEvLoop(h *ConnServer) (*evLoop, error) {
	p, err := evloop.New(256)
	if err != nil {
		return nil, err
	}
	l := &evLoop{
		h: h, s: h.Core, p: p,
		clients: make(map[int32]*evClient),
		ups:     make(map[int32]*evUp),
		pools:   make(map[*upstream.Transport][]*evUp),
		done:    make(chan struct{}),
		out:     make([]byte, 0, EvMaxResponse+1024),
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
	if !l.p.Adopt(fd, c) {
		_ = unix.Close(fd)
		return false
	}
	return true
}

// Wakeup makes the loop look at the shutdown state and its pools; force
// closes every connection it has, busy or not (shutdown timed out).
func (l *evLoop) Wakeup(force bool) {
	if force {
		l.force.Store(true)
	}
	l.look.Store(true)
	l.p.Signal()
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
		events, err := l.p.Wait(raw, ms)
		if err != nil && err != unix.EINTR {
			l.s.Logger.Error("event loop failed; closing its connections", "error", err)
			return
		}
		l.now = time.Now()
		for i := range events {
			ev := &events[i]
			switch evloop.Tag(ev.Pad) {
			case evloop.TagClient:
				if c := l.clients[ev.Fd]; c != nil && c.serial == ev.Pad {
					l.onClient(c, ev.Events)
				}
			case evloop.TagUp:
				if u := l.ups[ev.Fd]; u != nil && u.serial == ev.Pad {
					l.onUp(u, ev.Events)
				}
			case evloop.TagWake:
				l.p.ClearWake()
				l.takeInbox()
				if l.look.Swap(false) {
					l.nextSweep = l.now // look at shutdown and the pools now
				}
			}
		}
		if !l.now.Before(l.nextSweep) {
			l.sweep()
		}
		if len(l.clients) == 0 && l.h.Shutting.Load() && l.p.InboxEmpty() {
			return
		}
	}
}

// exit closes everything the loop still has.
func (l *evLoop) exit() {
	l.takeInbox()
	for _, c := range l.clients {
		l.closeClient(c, StatusClientClosed)
	}
	for _, u := range l.ups {
		l.closeUp(u)
	}
	for _, fd := range l.p.Close() {
		_ = unix.Close(fd)
		l.h.WG.Done()
	}
	runtime.UnlockOSThread()
}

func (l *evLoop) takeInbox() {
	for _, fd := range l.p.TakeInbox() {
		l.addClient(fd)
	}
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
	shutting, force := l.h.Shutting.Load(), l.force.Load()
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
				if shutting || force || l.now.Sub(c.headSince) >= l.h.ReadHeaderTimeout {
					l.closeClient(c, 0)
				} else {
					l.sweepBy(c.headSince.Add(l.h.ReadHeaderTimeout))
				}
				continue
			}
			// On shutdown an idle client gets DrainIdleGrace (from the
			// shutdown or from going idle, whichever is later) for a
			// request already on its way.
			drainDue := false
			if shutting {
				due := graceFrom
				if c.idleSince.After(due) {
					due = c.idleSince
				}
				due = due.Add(DrainIdleGrace)
				if drainDue = !l.now.Before(due); !drainDue {
					l.sweepBy(due)
				}
			}
			if drainDue || force || l.now.Sub(c.idleSince) >= l.h.IdleTimeout {
				l.closeClient(c, 0)
			} else if c.n == 0 && l.now.Sub(c.idleSince) >= evSweep {
				c.buf = nil // an idle connection holds no buffer
			}
			continue
		}
		u := c.up
		switch {
		case force:
			l.closeClient(c, StatusClientClosed)
		case u.connecting && !l.now.Before(u.dialDeadline):
			l.closeUp(u)
			c.up = nil
			c.ex.err = &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(u.t.LoopAddr()), Err: os.ErrDeadlineExceeded}
			l.giveUpExchange(c, nil)
		case !c.rhDeadline.IsZero() && !l.now.Before(c.rhDeadline):
			l.closeUp(u)
			c.up = nil
			c.ex.err = upstream.ErrResponseHeaderTimeout
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
			if shutting || t.Retired() || u.closes != t.Closes() || l.now.Sub(u.idleSince) >= t.IdleTimeout() {
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
