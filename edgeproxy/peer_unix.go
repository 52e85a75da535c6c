//go:build unix

package edgeproxy

import (
	"crypto/tls"
	"net"
	"syscall"
)

// rawControl runs f on c's file descriptor; false when c has none. It uses
// Control, not Read: the connection's read deadline (which may have passed
// while a backend worked) must not stop a peek.
func rawControl(c net.Conn, f func(fd int)) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	return rc.Control(func(fd uintptr) { f(int(fd)) }) == nil
}

// usable reports whether a pooled backend connection can carry a new
// request: the backend has sent nothing since the last response (no
// unsolicited bytes, which would be taken as the next client's answer) and
// has not closed it. One non-blocking MSG_PEEK receive, no allocation (the
// raw connection and the peek function are made once per connection).
func (fc *fastConn) usable() bool {
	if fc.peek == nil {
		sc, ok := fc.c.(syscall.Conn)
		if !ok {
			return true
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return true
		}
		fc.rc = rc
		fc.peek = func(fd uintptr) {
			var b [1]byte
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			fc.clean = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		}
	}
	fc.clean = true
	if fc.rc.Control(fc.peek) != nil {
		return false
	}
	return fc.clean
}

// tcpUnder is the connection under a TLS connection (c itself otherwise),
// for peerClosed's queries of the socket's state: they consume nothing, so
// the TLS stream is untouched. Nothing else may use a TLS connection's
// descriptor.
func tcpUnder(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	return c
}
