package l4

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// tcpReplayLimit bounds what a relay records of the client's bytes
	// before its backend's first byte (SPEC R67); beyond it the connection
	// is committed to its backend.
	tcpReplayLimit = 64 << 10
	// tcpFailoverWindow is how long after its dial a backend connection may
	// still be replaced when it ends without a byte (SPEC R67).
	tcpFailoverWindow = 500 * time.Millisecond
	// tcpMaxFailovers bounds the replacements of one connection.
	tcpMaxFailovers = 2
	// tcpAnswerWait bounds how long a relayed connection counts as in
	// flight on its backend while the backend has not sent its first byte
	// (decision 16's drain waits for it): a protocol whose server never
	// speaks first nor answers stops holding the drain after it.
	tcpAnswerWait = 2 * time.Second
	// tcpDialRetryWindow bounds how long a new connection whose every
	// connect failed (refused, unreachable) keeps trying the listener's
	// current target, waiting tcpDialRetryFirst, then twice as long each
	// time, before the client is closed: an instance that is starting to
	// listen or a route that is being switched costs the client a short
	// wait instead of a reset (the zero-refused rule for TCP, R67).
	tcpDialRetryWindow = time.Second
	tcpDialRetryFirst  = 25 * time.Millisecond
)

// acquireTCP picks the listener's current target and a backend of it for
// one connection (round-robin over the route's instances), and counts the
// connection on that backend, as open and as in flight (awaiting the
// backend's first byte), before checking that the target is still current,
// so a status read after the next swap sees the connection (the same
// count-then-recheck as HTTP). A target without a backend (held, SPEC R58)
// is returned with nil, uncounted. releaseTCP undoes the counts of a
// backend acquired but not used.
func acquireTCP(l *tcpListener) (*tcpTarget, Backend) {
	for {
		tg := l.target.Load()
		b := tg.pick()
		if b == nil {
			return tg, nil
		}
		b.AddOpen(1)
		b.AddInFlight(1)
		if l.target.Load() == tg {
			return tg, b
		}
		releaseTCP(b)
	}
}

// releaseTCP undoes acquireTCP's counts on b.
func releaseTCP(b Backend) {
	b.AddInFlight(-1)
	b.AddOpen(-1)
}

// tcpSession is one relayed connection while its backend may still be
// replaced. Until the backend sends its first byte the client's bytes are
// recorded in replay; a backend that is no longer the listener's target and
// ends within tcpFailoverWindow of its dial without sending a byte (reset,
// or EOF before the client sent any), while the client still waits (has
// not half-closed), is replaced by the listener's current backend, which
// gets the recorded bytes (SPEC R67).
// That is the retired generation closing its listener under a connection
// the edge routed to it just before the switch.
type tcpSession struct {
	t      *TCPRelays
	l      *tcpListener
	rc     *relayConn
	client net.Conn

	mu sync.Mutex
	b  Backend // counted open (AddOpen)
	// awaiting is the backend on which the connection counts as in flight
	// (acquireTCP) until the backend's first byte, the session's end or
	// tcpAnswerWait (settle); nil once settled.
	awaiting  atomic.Pointer[Backend]
	answered  *time.Timer
	dialed    time.Time
	replay    []byte
	clientEOF bool
	failovers int
	// committed is set once the backend sent a byte or the replay limit
	// passed: the connection stays on its backend from then on.
	committed atomic.Bool
	// idleTimer closes the connection once silent for the route's idle
	// timeout (tcp_idle.go); idleStopped, under idleMu, once it ended.
	idleMu      sync.Mutex
	idleTimer   *time.Timer
	idleStopped bool
}

// settle ends the connection's in-flight count (idempotent): the backend
// answered, the session ended, or tcpAnswerWait passed.
func (s *tcpSession) settle() {
	if b := s.awaiting.Swap(nil); b != nil {
		(*b).AddInFlight(-1)
	}
}

// moveTo makes nb, acquired by acquireTCP, the session's backend in place
// of s.b: the counts move with it, except that a session already settled
// does not count as in flight again. Call with s.mu held or before the
// copy goroutines start.
func (s *tcpSession) moveTo(nb Backend) {
	s.b.AddOpen(-1)
	s.b = nb
	if old := s.awaiting.Load(); old != nil && s.awaiting.CompareAndSwap(old, &nb) {
		(*old).AddInFlight(-1)
		return
	}
	nb.AddInFlight(-1)
}

// upstream returns the session's current backend connection.
func (s *tcpSession) upstream() net.Conn {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	return s.rc.upstream
}

// clientToUpstream copies the client's bytes to the current backend,
// recording them until the session is committed, then hands the rest to
// io.Copy (splice), and half-closes the backend's write side at the end.
func (s *tcpSession) clientToUpstream(done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	buf := make([]byte, 16<<10)
	for !s.committed.Load() {
		n, err := s.client.Read(buf)
		if n > 0 {
			s.mu.Lock()
			if !s.committed.Load() {
				if len(s.replay)+n > tcpReplayLimit {
					s.committed.Store(true)
					s.replay = nil
				} else {
					s.replay = append(s.replay, buf[:n]...)
				}
			}
			// The backend these bytes are for is the one current when
			// they were recorded: a failover after this point replays
			// them, one before it is the upstream read here.
			up := s.upstream()
			s.mu.Unlock()
			// A write to a backend that has just failed is harmless: the
			// bytes are in replay for its replacement.
			if _, werr := up.Write(buf[:n]); werr != nil && s.committed.Load() {
				closeWrite(s.upstream())
				return
			}
		}
		if err != nil {
			s.mu.Lock()
			s.clientEOF = true
			s.mu.Unlock()
			closeWrite(s.upstream())
			return
		}
	}
	up := s.upstream()
	_, _ = io.Copy(up, s.client)
	closeWrite(up)
}

// upstreamToClient copies the backend's bytes to the client; a backend that
// ends before its first byte is replaced when failover allows it.
func (s *tcpSession) upstreamToClient(done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	var one [1]byte
	for {
		up := s.upstream()
		n, err := up.Read(one[:])
		if n > 0 {
			s.committed.Store(true)
			s.settle()
			if _, err := s.client.Write(one[:n]); err != nil {
				closeWrite(s.client)
				return
			}
			_, _ = io.Copy(s.client, up)
			break
		}
		if err != nil && !s.failover(up, err) {
			// Ended for good: a failed write of the client's next bytes
			// ends the other direction too.
			s.committed.Store(true)
			break
		}
	}
	closeWrite(s.client)
}

// failover replaces failed, the session's backend connection, which
// ended with readErr, with one to the listener's current backend when SPEC
// R67 allows it, and reports whether it did. An orderly close (EOF) after
// the client sent bytes is not replayed: a backend closing with unread
// bytes resets the connection, so an EOF means it read them (a push-only
// protocol's retired backend that processed them and drained); a client
// that half-closed is not replayed even when its FIN is still unread.
func (s *tcpSession) failover(failed net.Conn, readErr error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed.Load() || s.clientEOF || s.failovers >= tcpMaxFailovers ||
		time.Since(s.dialed) > tcpFailoverWindow ||
		errors.Is(readErr, io.EOF) && len(s.replay) > 0 || s.t.peerClosed(s.client) {
		return false
	}
	_, nb := acquireTCP(s.l)
	if nb == nil {
		return false
	}
	if nb == s.b {
		releaseTCP(nb)
		return false
	}
	next, err := net.DialTimeout("tcp", nb.Addr(), s.t.dialTimeout)
	if err == nil && len(s.replay) > 0 {
		_, err = next.Write(s.replay)
	}
	if err != nil {
		releaseTCP(nb)
		if next != nil {
			_ = next.Close()
		}
		return false
	}
	s.failovers++
	s.t.logger.Debug("tcp relay failover", "listen", s.l.listen, "from", s.b.Addr(), "to", nb.Addr(), "replayed", len(s.replay))
	s.t.mu.Lock()
	if s.t.closed {
		// The relays closed (shutdown) while this dialed: close cut
		// the connections it knew of, so this one ends too.
		s.t.mu.Unlock()
		releaseTCP(nb)
		_ = next.Close()
		return false
	}
	s.rc.upstream = next
	s.t.mu.Unlock()
	s.moveTo(nb)
	s.dialed = time.Now()
	_ = failed.Close()
	return true
}

// closeWrite half-closes c's write side, or closes c when it cannot.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = c.Close()
	}
}

// dial connects the session to its backend; when that fails and the
// listener has moved on to another backend, the connection goes there
// instead (SPEC R67). When every connect fails it tries the listener's
// current target again, after 25, 50, 100… ms, for tcpDialRetryWindow,
// and returns the last error only then.
func (s *tcpSession) dial() (net.Conn, error) {
	deadline := time.Now().Add(tcpDialRetryWindow)
	wait := tcpDialRetryFirst
	for {
		up, err := s.dialOnce()
		if err == nil || time.Now().Add(wait).After(deadline) || s.t.peerClosed(s.client) {
			return up, err
		}
		if h := s.t.retryHook; h != nil {
			h()
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-s.t.done:
			timer.Stop()
			return nil, err
		}
		// The listener's target may have moved on meanwhile (a switch,
		// a readmitted instance): the next attempt goes to its pick.
		_, nb := acquireTCP(s.l)
		if nb == nil {
			return nil, err
		}
		if nb == s.b {
			releaseTCP(nb)
		} else {
			s.moveTo(nb)
		}
		wait *= 2
	}
}

// dialOnce is one connect of the session to its backend, and, when that
// fails, to the listener's next instance (R21 ejection, R67).
func (s *tcpSession) dialOnce() (net.Conn, error) {
	up, err := net.DialTimeout("tcp", s.b.Addr(), s.t.dialTimeout)
	if err == nil {
		s.dialed = time.Now()
		return up, nil
	}
	s.t.logger.Debug("tcp relay dial", "backend", s.b.Addr(), "error", err)
	// Passive health (R21): the instance that refused is ejected (never
	// the last one) and the connect tries the next instance.
	if tg := s.l.target.Load(); tg != nil && tg.ejectable(s.b) {
		s.t.reg.ConnectFailed(s.b, s.l.listen)
	}
	_, nb := acquireTCP(s.l)
	if nb == nil {
		return nil, err
	}
	if nb != s.b {
		s.t.reg.Retried(s.b)
	}
	if nb == s.b {
		releaseTCP(nb)
		return nil, err
	}
	s.moveTo(nb)
	up, err = net.DialTimeout("tcp", s.b.Addr(), s.t.dialTimeout)
	if err != nil {
		s.t.logger.Debug("tcp relay dial", "backend", s.b.Addr(), "error", err)
		return nil, err
	}
	s.dialed = time.Now()
	return up, nil
}
