package l4

import (
	"cmp"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// maxDatagram is the largest UDP payload relayed.
const maxDatagram = 64 * 1024

// UDP session bounds (sources are spoofable: one datagram from each of many
// addresses must not take the edge's memory or descriptors).
const (
	// DefaultUDPMaxSessions bounds the sessions of one UDP listener.
	DefaultUDPMaxSessions = 4096
	// DefaultUDPMaxSessionsPerSource bounds one source IP's sessions on a
	// listener (a client behind NAT uses several ports).
	DefaultUDPMaxSessionsPerSource = 256
)

// UDPConfig is what UDP relays need from the edge that runs them.
type UDPConfig struct {
	// Backends resolves a route's backend address (required).
	Backends Backends
	// IdleTimeout ends a session idle this long both ways.
	IdleTimeout time.Duration
	// Logger logs bind failures and relay errors (nil: none).
	Logger hclog.Logger
	// MaxSessions bounds each listener's sessions, MaxSessionsPerSource
	// one source's (0: DefaultUDPMaxSessions, DefaultUDPMaxSessionsPerSource).
	MaxSessions, MaxSessionsPerSource int
	// Listen binds (or takes over) a socket (nil: net.ListenUDP); Forget
	// unregisters one that closes (nil: nothing).
	Listen func(addr string) (*net.UDPConn, error)
	Forget func(addr string)
	// Budget is shared with the TCP relays (nil: NewBudget(0, -1)).
	Budget *Budget
}

// datagramPool holds the buffers backend replies are read into: a session
// waits for its backend without holding one (udp_unix.go), so an idle
// session costs a goroutine and a socket, not 64 KiB.
var datagramPool = sync.Pool{New: func() any { return new([maxDatagram]byte) }}

// UDPRelays owns the UDP listeners of the current route table. Each client
// address gets a session pinned to the backend current when its first
// datagram arrived: after a swap, existing sessions keep their backend until
// they have been idle for the idle timeout (they drain), new clients go to
// the new backend. Removing a route closes its listener and its sessions.
type UDPRelays struct {
	reg    Backends
	idle   time.Duration
	logger hclog.Logger
	// maxSessions and maxPerSource bound each listener's sessions;
	// fdBudget bounds the descriptors of all sessions together (half of
	// the process's descriptor limit: the rest stays for HTTP, TCP and the
	// edge itself). open counts the session sockets.
	maxSessions  int
	maxPerSource int
	fdBudget     int64
	open         atomic.Int64
	// budget is shared with the TCP relays: a session counts one
	// connection and one descriptor.
	budget *Budget
	// listen binds (or takes over) a socket; forget unregisters it.
	listen func(addr string) (*net.UDPConn, error)
	forget func(addr string)

	mu        sync.Mutex
	listeners map[string]*udpListener
	failed    map[string]string
	closed    bool
	wg        sync.WaitGroup
}

type udpListener struct {
	listen  string
	pc      *net.UDPConn
	backend atomic.Pointer[Backend]
	// maxSessions and idle (a time.Duration) are the route's bounds
	// (0 in the route: the relays' defaults).
	maxSessions, idle atomic.Int64

	mu       sync.Mutex
	sessions map[netip.AddrPort]*udpSession
	// perSource counts sessions per client source (sourceKey).
	perSource map[netip.Addr]int
}

// udpSession relays one client's datagrams to one backend.
type udpSession struct {
	client   netip.AddrPort
	backend  Backend
	upstream *net.UDPConn
	// lastActive is the unix-nano time of the last datagram either way.
	lastActive atomic.Int64
	// released is set once its descriptor left the budget (release).
	released atomic.Bool
}

// release takes s out of the descriptor budget and its backend's open
// count, once: at its eviction (so a new session never waits on the
// evicted one's goroutine to stay within the budget) or when it ends.
func (u *UDPRelays) release(s *udpSession) {
	if s.released.CompareAndSwap(false, true) {
		u.open.Add(-1)
		u.budget.release(1)
		s.backend.AddOpen(-1)
	}
}

// NewUDPRelays returns relays with no listener; Update binds them.
func NewUDPRelays(cfg UDPConfig) *UDPRelays {
	u := &UDPRelays{
		reg:          cfg.Backends,
		idle:         cfg.IdleTimeout,
		logger:       orNull(cfg.Logger),
		maxSessions:  DefaultUDPMaxSessions,
		maxPerSource: DefaultUDPMaxSessionsPerSource,
		fdBudget:     max(int64(descriptorLimit()/2), 64),
		listeners:    make(map[string]*udpListener),
		failed:       make(map[string]string),
		listen:       cfg.Listen,
		forget:       cfg.Forget,
		budget:       cfg.Budget,
	}
	if u.budget == nil {
		u.budget = NewBudget(0, -1)
	}
	if cfg.MaxSessions > 0 {
		u.maxSessions = cfg.MaxSessions
	}
	if cfg.MaxSessionsPerSource > 0 {
		u.maxPerSource = cfg.MaxSessionsPerSource
	}
	if u.listen == nil {
		u.listen = func(addr string) (*net.UDPConn, error) {
			ua, err := net.ResolveUDPAddr("udp", addr)
			if err != nil {
				return nil, err
			}
			return net.ListenUDP("udp", ua)
		}
	}
	if u.forget == nil {
		u.forget = func(string) {}
	}
	return u
}

// Update makes the UDP listeners match routes (see TCPRelays.Update).
func (u *UDPRelays) Update(routes []routetable.L4Route) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	want := make(map[string]routetable.L4Route, len(routes))
	for _, r := range routes {
		want[r.Listen] = r
	}
	for listen, l := range u.listeners {
		if _, ok := want[listen]; !ok {
			u.forget(listen)
			l.close()
			delete(u.listeners, listen)
		}
	}
	prevFailed := u.failed
	u.failed = make(map[string]string)
	for listen, r := range want {
		b := u.reg.Get(r.Backend)
		if l, ok := u.listeners[listen]; ok {
			u.bound(l, r)
			l.backend.Store(&b)
			continue
		}
		pc, err := u.listen(listen)
		if err != nil {
			u.failed[listen] = err.Error()
			if prevFailed[listen] == err.Error() {
				continue // still failing the same way: logged already
			}
			u.logger.Error("udp listener cannot bind", "listen", listen, "app", r.App, "service", r.Service, "error", err)
			continue
		}
		l := &udpListener{listen: listen, pc: pc, sessions: make(map[netip.AddrPort]*udpSession), perSource: make(map[netip.Addr]int)}
		u.bound(l, r)
		l.backend.Store(&b)
		u.listeners[listen] = l
		u.wg.Add(1)
		go u.serve(l)
	}
}

// bound sets l's session cap and idle timeout from its route (0: the
// relays').
func (u *UDPRelays) bound(l *udpListener, r routetable.L4Route) {
	l.maxSessions.Store(int64(cmp.Or(r.MaxConns, u.maxSessions)))
	l.idle.Store(int64(cmp.Or(time.Duration(r.IdleTimeoutMS)*time.Millisecond, u.idle)))
}

// serve reads client datagrams from one listener until it is closed.
func (u *UDPRelays) serve(l *udpListener) {
	defer u.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, client, err := l.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			u.logger.Debug("udp read", "listen", l.listen, "error", err)
			continue
		}
		s := u.session(l, client)
		if s == nil {
			continue
		}
		s.lastActive.Store(time.Now().UnixNano())
		if _, err := s.upstream.Write(buf[:n]); err != nil {
			u.logger.Debug("udp relay write", "backend", s.backend.Addr(), "error", err)
		}
	}
}

// session returns the client's session, creating it on the listener's
// current backend. A new session over the bounds (maxPerSource: the
// datagram is dropped; maxSessions or the descriptor budget: the
// listener's least recently active session is closed first) never takes
// more than its share.
func (u *UDPRelays) session(l *udpListener, client netip.AddrPort) *udpSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.sessions[client]; ok {
		return s
	}
	if l.sessions == nil { // listener closed
		return nil
	}
	src := sourceKey(client.Addr())
	if l.perSource[src] >= u.maxPerSource {
		u.logger.Debug("udp session refused: too many from one source", "listen", l.listen, "source", src)
		return nil
	}
	if int64(len(l.sessions)) >= l.maxSessions.Load() || u.open.Load() >= u.fdBudget {
		evicted := l.evictOldestLocked()
		if evicted == nil {
			u.logger.Debug("udp session refused: descriptor budget spent", "listen", l.listen)
			return nil
		}
		u.release(evicted)
	}
	for !u.budget.acquire(1) {
		evicted := l.evictOldestLocked()
		if evicted == nil {
			u.logger.Debug("udp session refused: the relays are full", "listen", l.listen)
			return nil
		}
		u.release(evicted)
	}
	b := *l.backend.Load()
	raddr, err := net.ResolveUDPAddr("udp", b.Addr())
	if err != nil {
		u.budget.release(1)
		return nil
	}
	up, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		u.budget.release(1)
		u.logger.Debug("udp relay dial", "backend", b.Addr(), "error", err)
		return nil
	}
	s := &udpSession{client: client, backend: b, upstream: up}
	s.lastActive.Store(time.Now().UnixNano())
	l.sessions[client] = s
	l.perSource[src]++
	u.open.Add(1)
	b.AddOpen(1)
	u.wg.Add(1)
	go u.replies(l, s)
	return s
}

// replies relays backend datagrams back to the client until the session has
// been idle for the idle timeout or its listener closes.
func (u *UDPRelays) replies(l *udpListener, s *udpSession) {
	defer u.wg.Done()
	defer func() {
		l.mu.Lock()
		if l.sessions != nil && l.sessions[s.client] == s {
			l.removeLocked(s)
		}
		l.mu.Unlock()
		_ = s.upstream.Close()
		u.release(s)
	}()
	rd := newDatagramReader(s.upstream)
	idle := time.Duration(l.idle.Load())
	for {
		last := time.Unix(0, s.lastActive.Load())
		_ = s.upstream.SetReadDeadline(last.Add(idle))
		buf, n, err := rd.read()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if time.Since(time.Unix(0, s.lastActive.Load())) >= idle {
					return // idle: the session expires
				}
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ICMP port unreachable from a restarting backend
		}
		s.lastActive.Store(time.Now().UnixNano())
		_, err = l.pc.WriteToUDPAddrPort(buf[:n], s.client)
		datagramPool.Put(buf)
		if err != nil && errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

// removeLocked drops s from l's maps (l.mu held).
func (l *udpListener) removeLocked(s *udpSession) {
	delete(l.sessions, s.client)
	src := sourceKey(s.client.Addr())
	if l.perSource[src] <= 1 {
		delete(l.perSource, src)
	} else {
		l.perSource[src]--
	}
}

// evictOldestLocked closes l's least recently active session (idle ones
// go first) and returns it; nil when l has none (l.mu held).
func (l *udpListener) evictOldestLocked() *udpSession {
	var oldest *udpSession
	for _, s := range l.sessions {
		if oldest == nil || s.lastActive.Load() < oldest.lastActive.Load() {
			oldest = s
		}
	}
	if oldest == nil {
		return nil
	}
	l.removeLocked(oldest)
	_ = oldest.upstream.Close() // its goroutine ends
	return oldest
}

// close closes the listener and ends its sessions.
func (l *udpListener) close() {
	_ = l.pc.Close()
	l.mu.Lock()
	for _, s := range l.sessions {
		_ = s.upstream.Close()
	}
	l.sessions = nil
	l.mu.Unlock()
}

// ListenerStatus reports every bound and failed UDP listener.
func (u *UDPRelays) ListenerStatus() []routetable.ListenerStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]routetable.ListenerStatus, 0, len(u.listeners)+len(u.failed))
	for listen := range u.listeners {
		out = append(out, routetable.ListenerStatus{Addr: listen, Proto: "udp"})
	}
	for listen, e := range u.failed {
		out = append(out, routetable.ListenerStatus{Addr: listen, Proto: "udp", Error: e})
	}
	return out
}

// Close closes every listener and session and waits for their goroutines.
func (u *UDPRelays) Close() {
	u.mu.Lock()
	u.closed = true
	for _, l := range u.listeners {
		l.close()
	}
	u.listeners = map[string]*udpListener{}
	u.mu.Unlock()
	u.wg.Wait()
}

// FailedCount returns how many listeners could not be bound.
func (u *UDPRelays) FailedCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.failed)
}

// sourceKey is what the per-source session bound counts a client address
// under: an IPv4 address (IPv4-mapped IPv6 ones unmapped) by itself, an
// IPv6 address by its /64, the least a host is usually given, so cycling
// through one's own /64 gains no sessions.
func sourceKey(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}
