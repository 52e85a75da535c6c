package handoff

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// ReplayConn is a connection handed to net/http: prefix (bytes the loop
// already read) is read first.
type ReplayConn struct {
	net.Conn
	Prefix []byte
}

// CloseWrite lets net/http half-close before closing a connection it
// rejected (a 400 or 431 with unread input), so the client reads the answer
// instead of a reset.
func (c *ReplayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// SyscallConn exposes the socket (PeerClosed, upstream.Conn's check).
func (c *ReplayConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// Unread is how many bytes of prefix are left (a backend connection
// upstream.Transport.Put does not pool while any are).
func (c *ReplayConn) Unread() int { return len(c.Prefix) }

func (c *ReplayConn) Read(p []byte) (int, error) {
	if len(c.Prefix) > 0 {
		n := copy(p, c.Prefix)
		c.Prefix = c.Prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// HandoffListener is the net.Listener the net/http server accepts handed-
// off connections from.
type HandoffListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func NewHandoffListener(addr net.Addr) *HandoffListener {
	return &HandoffListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *HandoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *HandoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *HandoffListener) Addr() net.Addr { return l.addr }

// Push hands c to the net/http server; false (c untouched) once closed.
func (l *HandoffListener) Push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}
