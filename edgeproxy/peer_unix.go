//go:build unix

package edgeproxy

import (
	"net"
	"syscall"
)

// peerClosed reports whether c's peer has closed or reset the connection,
// without consuming or waiting for data: one non-blocking MSG_PEEK receive
// (0 bytes: orderly close; an error other than EAGAIN: reset).
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	// Control, not Read: the connection's read deadline (which may have
	// passed while the backend worked) must not stop the peek.
	_ = rc.Control(func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil || err != nil && err != syscall.EAGAIN && err != syscall.EINTR
	})
	return closed
}
