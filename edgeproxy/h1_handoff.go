package edgeproxy

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

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

// SyscallConn exposes the socket (peerClosed, upstream.Conn's check).
func (c *replayConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// Unread is how many bytes of prefix are left (a backend connection
// upstream.Transport.Put does not pool while any are).
func (c *replayConn) Unread() int { return len(c.prefix) }

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
