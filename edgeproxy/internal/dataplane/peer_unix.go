//go:build unix

package dataplane

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

// tcpUnder is the connection under a TLS connection (c itself otherwise),
// for PeerClosed's queries of the socket's state: they consume nothing, so
// the TLS stream is untouched. Nothing else may use a TLS connection's
// descriptor.
func tcpUnder(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	return c
}
