package l4

import (
	"cmp"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// TCPConfig is what TCP relays need from the edge that runs them.
type TCPConfig struct {
	// Backends resolves a route's backend addresses (required).
	Backends Backends
	// DialTimeout bounds each connect to a backend.
	DialTimeout time.Duration
	// Logger logs bind failures and relay errors (nil: none).
	Logger hclog.Logger
	// Listen binds (or takes over) a listener (nil: net.Listen); Forget
	// unregisters one that closes (nil: nothing).
	Listen func(addr string) (net.Listener, error)
	Forget func(addr string)
	// PeerClosed reports whether a client has closed or reset its
	// connection (nil: never known).
	PeerClosed func(net.Conn) bool
	// DialRetryHook, when set (tests), is called each time a connection's
	// connects all failed and it waits to retry.
	DialRetryHook func()
	// Budget is shared with the UDP relays (nil: NewBudget(0, -1)).
	Budget *Budget
	// Wake, when set, is told of each connection to a sleeping service's
	// listener (SPEC R81), which is held for the route's wake bound.
	Wake func(app, service string, bound time.Duration)
	// WakeHeld counts the connections held for a wake (nil: none).
	WakeHeld interface{ Add(float64) }
}

// TCPRelays owns the TCP listeners of the current route table. A listener
// whose listen address survives a swap keeps listening and sends new
// connections to the route's new backend; connections already relayed keep
// the backend they dialed. A listener whose route disappears closes; its
// relayed connections continue until either side closes them.
type TCPRelays struct {
	reg         Backends
	dialTimeout time.Duration
	logger      hclog.Logger
	// listen binds (or takes over) a listener; forget unregisters it.
	listen     func(addr string) (net.Listener, error)
	forget     func(addr string)
	peerClosed func(net.Conn) bool
	retryHook  func()
	budget     *Budget
	wake       func(app, service string, bound time.Duration)
	wakeHeld   interface{ Add(float64) }
	// refused counts connections closed at accept over a bound.
	refused atomic.Int64

	mu        sync.Mutex
	listeners map[string]*tcpListener
	// failed holds listen addresses that could not be bound, with the error.
	failed map[string]string
	// conns tracks every live relayed connection pair for shutdown.
	conns  map[*relayConn]struct{}
	closed bool
	// done is closed by close: held connections give up.
	done chan struct{}
	wg   sync.WaitGroup
}

type tcpListener struct {
	listen string
	ln     net.Listener
	target atomic.Pointer[tcpTarget]
	// open counts the listener's connections (held or relayed); maxConns
	// bounds it and idle is the idle timeout, both from the route.
	open, maxConns atomic.Int64
	idle           atomic.Int64 // time.Duration
	// lastRefusal is when a refusal was last logged (unix nanos).
	lastRefusal atomic.Int64
	// lastAccept is when the listener last accepted a connection (unix
	// nanos; 0: never).
	lastAccept atomic.Int64
}

// bound sets l's cap and idle timeout from its route (0: the defaults).
func (l *tcpListener) bound(r routetable.L4Route) {
	l.maxConns.Store(int64(cmp.Or(r.MaxConns, DefaultTCPMaxConns)))
	l.idle.Store(int64(time.Duration(cmp.Or(r.IdleTimeoutMS, DefaultTCPIdleTimeoutMS)) * time.Millisecond))
}

// tcpTarget is where a listener's new connections go: backend, or, while
// backend is nil, held until the next target (SPEC R58).
type tcpTarget struct {
	// backends are the route's instances; new connections go round-robin.
	backends []Backend
	next     atomic.Uint64
	hold     *routetable.Hold
	// asleep is set while the service sleeps (SPEC R81): app and service
	// name it to Wake.
	asleep       *routetable.Asleep
	app, service string
	// replaced is closed when the listener gets its next target.
	replaced chan struct{}
	held     atomic.Int64
}

// pick returns the backend for one new connection, round-robin over the
// route's instances not ejected (passive health); nil while held.
func (tg *tcpTarget) pick() Backend {
	switch len(tg.backends) {
	case 0:
		return nil
	case 1:
		return tg.backends[0]
	}
	n := len(tg.backends)
	i := int((tg.next.Add(1) - 1) % uint64(n))
	now := time.Now().UnixNano()
	for k := 0; k < n; k++ {
		if b := tg.backends[(i+k)%n]; !b.Ejected(now) {
			return b
		}
	}
	return tg.backends[i] // all ejected: round-robin over them
}

// ejectable reports whether b may be ejected: another instance of the
// target is not ejected (never the last one).
func (tg *tcpTarget) ejectable(b Backend) bool {
	now := time.Now().UnixNano()
	for _, o := range tg.backends {
		if o != b && !o.Ejected(now) {
			return true
		}
	}
	return false
}

// retarget makes tg the listener's target and wakes the connections held
// on the previous one.
func (l *tcpListener) retarget(tg *tcpTarget) {
	if prev := l.target.Swap(tg); prev != nil {
		close(prev.replaced)
	}
}

// relayConn is one relayed connection: the client side and the backend side.
type relayConn struct {
	client, upstream net.Conn
}

// NewTCPRelays returns relays with no listener; Update binds them.
func NewTCPRelays(cfg TCPConfig) *TCPRelays {
	t := &TCPRelays{
		reg:         cfg.Backends,
		dialTimeout: cfg.DialTimeout,
		logger:      orNull(cfg.Logger),
		listeners:   make(map[string]*tcpListener),
		failed:      make(map[string]string),
		conns:       make(map[*relayConn]struct{}),
		done:        make(chan struct{}),
		listen:      cfg.Listen,
		forget:      cfg.Forget,
		peerClosed:  cfg.PeerClosed,
		retryHook:   cfg.DialRetryHook,
		budget:      cfg.Budget,
		wake:        cfg.Wake,
		wakeHeld:    cfg.WakeHeld,
	}
	if t.budget == nil {
		t.budget = NewBudget(0, -1)
	}
	if t.listen == nil {
		t.listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	if t.forget == nil {
		t.forget = func(string) {}
	}
	if t.peerClosed == nil {
		t.peerClosed = func(net.Conn) bool { return false }
	}
	return t
}

// Update makes the listeners match routes: retarget kept listeners, bind new
// ones, close removed ones. A bind failure is recorded per listener and does
// not affect the others.
func (t *TCPRelays) Update(routes []routetable.L4Route) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	want := make(map[string]routetable.L4Route, len(routes))
	for _, r := range routes {
		want[r.Listen] = r
	}
	for listen, l := range t.listeners {
		if _, ok := want[listen]; !ok {
			t.forget(listen)
			_ = l.ln.Close()
			l.retarget(&tcpTarget{replaced: make(chan struct{})}) // held connections close
			delete(t.listeners, listen)
		}
	}
	prevFailed := t.failed
	t.failed = make(map[string]string)
	for listen, r := range want {
		tg := &tcpTarget{hold: r.Hold, asleep: r.Asleep, app: r.App, service: r.Service, replaced: make(chan struct{})}
		if r.Hold == nil {
			for _, b := range r.L4Backends() {
				tg.backends = append(tg.backends, t.reg.Get(b.Addr))
			}
		}
		if l, ok := t.listeners[listen]; ok {
			l.bound(r)
			l.retarget(tg)
			continue
		}
		ln, err := t.listen(listen)
		if err != nil {
			t.failed[listen] = err.Error()
			if prevFailed[listen] == err.Error() {
				continue // still failing the same way: logged already
			}
			t.logger.Error("tcp listener cannot bind", "listen", listen, "app", r.App, "service", r.Service, "error", err)
			continue
		}
		l := &tcpListener{listen: listen, ln: ln}
		l.bound(r)
		l.retarget(tg)
		t.listeners[listen] = l
		t.wg.Add(1)
		go t.accept(l)
	}
}

// accept serves one listener until it is closed.
func (t *TCPRelays) accept(l *tcpListener) {
	defer t.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.logger.Warn("tcp accept", "listen", l.listen, "error", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		l.lastAccept.Store(time.Now().UnixNano())
		if !t.admit(l) {
			_ = c.Close()
			continue
		}
		tg, b := acquireTCP(l) // read once: this connection stays on its backend
		t.wg.Add(1)
		if b == nil {
			go func() { t.holdConn(c, l, tg); t.leave(l) }()
			continue
		}
		go func() { t.relay(c, l, b); t.leave(l) }()
	}
}

// tcpRelayFDs is what one relayed connection costs in descriptors: the
// client's and the backend's.
const tcpRelayFDs = 2

// admit counts a new connection on l and on the shared budget, or reports
// false when that would pass the route's cap, the relays' cap or the
// descriptors they may use: the connection is then closed unserved (the
// refusal is logged at most once a minute per listener).
func (t *TCPRelays) admit(l *tcpListener) bool {
	if l.open.Add(1) <= l.maxConns.Load() {
		if t.budget.acquire(tcpRelayFDs) {
			return true
		}
	}
	l.open.Add(-1)
	t.refused.Add(1)
	now := time.Now().UnixNano()
	if last := l.lastRefusal.Load(); now-last > int64(time.Minute) && l.lastRefusal.CompareAndSwap(last, now) {
		conns, fds := t.budget.Used()
		t.logger.Warn("tcp connection refused: the relay is full (raise max_conns on the interface, or the edge's descriptor limit)",
			"listen", l.listen, "route_conns", l.open.Load(), "route_max", l.maxConns.Load(), "relay_conns", conns, "relay_fds", fds)
	}
	return false
}

// leave gives back what admit took.
func (t *TCPRelays) leave(l *tcpListener) {
	l.open.Add(-1)
	t.budget.release(tcpRelayFDs)
}

// Refused returns how many connections were closed at accept over a bound.
func (t *TCPRelays) Refused() int64 { return t.refused.Load() }

// holdConn holds an accepted connection while its listener's service is
// between generations (SPEC R58) or wakes (R81: the connection asks for
// the wake, and is held for the route's wake bound from its arrival): it
// is spliced to the backend of the first target that has one, or closed
// when the bound passes, the queue is full, a target that neither holds
// nor sleeps arrives, or the relays close.
func (t *TCPRelays) holdConn(c net.Conn, l *tcpListener, tg *tcpTarget) {
	var b Backend
	arrived := time.Now()
	for {
		if b != nil {
			t.relay(c, l, b) // takes over the wg count
			return
		}
		now := time.Now()
		queue := int64(routetable.DefaultHoldQueue)
		if tg.hold != nil && tg.hold.Queue > 0 {
			queue = int64(tg.hold.Queue)
		}
		until := time.Time{}
		if tg.hold != nil {
			until = tg.hold.Until
		}
		if tg.asleep != nil {
			until = arrived.Add(edgestate.WakeTimeout(tg.asleep.WakeTimeoutMS))
		}
		holding := now.Before(until)
		if !holding || tg.held.Add(1) > queue {
			if holding {
				tg.held.Add(-1)
			}
			_ = c.Close()
			t.wg.Done()
			return
		}
		if tg.asleep != nil && t.wake != nil {
			t.wake(tg.app, tg.service, edgestate.WakeTimeout(tg.asleep.WakeTimeoutMS))
		}
		next, nb := t.awaitTarget(l, tg, until.Sub(now))
		tg.held.Add(-1)
		if next == nil {
			_ = c.Close()
			t.wg.Done()
			return
		}
		tg, b = next, nb
	}
}

// awaitTarget waits up to d for l's next target after tg (nil when d
// passes or the relays close), counting the wait as held for a wake when
// tg sleeps.
func (t *TCPRelays) awaitTarget(l *tcpListener, tg *tcpTarget, d time.Duration) (*tcpTarget, Backend) {
	if tg.asleep != nil && t.wakeHeld != nil {
		t.wakeHeld.Add(1)
		defer t.wakeHeld.Add(-1)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-tg.replaced:
		return acquireTCP(l)
	case <-timer.C:
	case <-t.done:
	}
	return nil, nil
}

// LastAccept returns when the listener on listen last accepted a
// connection (zero: never, or no such listener).
func (t *TCPRelays) LastAccept(listen string) time.Time {
	t.mu.Lock()
	l := t.listeners[listen]
	t.mu.Unlock()
	if l == nil {
		return time.Time{}
	}
	if n := l.lastAccept.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// relay dials b, already counted by acquireTCP (open, and in flight until
// the backend's first byte or tcpAnswerWait: decision 16's drain waits for
// an exchange the old generation has not answered yet), and copies both
// directions, propagating half-closes (CloseWrite) so protocols that shut
// down one direction keep working. A backend that fails before its first
// byte may be replaced by the listener's current one (SPEC R67).
func (t *TCPRelays) relay(client net.Conn, l *tcpListener, b Backend) {
	defer t.wg.Done()
	s := &tcpSession{t: t, l: l, client: client, b: b}
	s.awaiting.Store(&b)
	s.answered = time.AfterFunc(tcpAnswerWait, s.settle)
	defer func() {
		s.answered.Stop()
		s.settle()
		s.mu.Lock()
		s.b.AddOpen(-1)
		s.mu.Unlock()
	}()
	upstream, err := s.dial()
	if err != nil {
		_ = client.Close()
		return
	}
	s.rc = &relayConn{client: client, upstream: upstream}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		_ = client.Close()
		_ = upstream.Close()
		return
	}
	t.conns[s.rc] = struct{}{}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.conns, s.rc)
		up := s.rc.upstream
		t.mu.Unlock()
		_ = client.Close()
		_ = up.Close()
	}()

	if idle := time.Duration(l.idle.Load()); idle > 0 {
		s.idleTimer = time.AfterFunc(idle, func() { s.checkIdle(idle) })
		defer s.stopIdle()
	}
	done := make(chan struct{}, 2)
	go s.clientToUpstream(done)
	go s.upstreamToClient(done)
	<-done
	<-done
}

// ListenerStatus reports every bound and failed TCP listener.
func (t *TCPRelays) ListenerStatus() []routetable.ListenerStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]routetable.ListenerStatus, 0, len(t.listeners)+len(t.failed))
	for listen := range t.listeners {
		out = append(out, routetable.ListenerStatus{Addr: listen, Proto: "tcp"})
	}
	for listen, e := range t.failed {
		out = append(out, routetable.ListenerStatus{Addr: listen, Proto: "tcp", Error: e})
	}
	return out
}

// StopAccepting closes every listener (unregistering it, Forget): when it
// returns no listener accepts a connection any more, so one made later is
// accepted by whoever else holds the socket (the next edge after a
// hand-over). Relayed connections continue; Update binds anew.
func (t *TCPRelays) StopAccepting() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for listen, l := range t.listeners {
		t.forget(listen)
		_ = l.ln.Close() // returns once no accept is under way
	}
	t.listeners = map[string]*tcpListener{}
}

// Drain stops accepting (StopAccepting) and waits until every relayed
// connection has ended or ctx ends (Close then cuts the rest).
func (t *TCPRelays) Drain(ctx context.Context) {
	t.StopAccepting()
	for {
		t.mu.Lock()
		n := len(t.conns)
		t.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close closes every listener and every relayed connection, then waits for
// the relay goroutines.
func (t *TCPRelays) Close() {
	t.mu.Lock()
	if !t.closed {
		close(t.done)
	}
	t.closed = true
	for _, l := range t.listeners {
		_ = l.ln.Close()
	}
	t.listeners = map[string]*tcpListener{}
	for rc := range t.conns {
		_ = rc.client.Close()
		_ = rc.upstream.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// FailedCount returns how many listeners could not be bound.
func (t *TCPRelays) FailedCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.failed)
}
