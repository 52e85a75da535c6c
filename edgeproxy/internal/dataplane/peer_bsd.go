//go:build unix && !linux

package dataplane

import (
	"net"
	"syscall"
)

// PeerClosed reports whether c's peer has closed or reset the connection:
// a non-blocking MSG_PEEK receive (0 bytes: orderly close; an error other
// than EAGAIN: reset). Unread bytes hide a close here; Linux uses TCP_INFO.
func peerClosed(c net.Conn) bool {
	closed := false
	c = tcpUnder(c)
	var b [1]byte
	rawControl(c, func(fd int) {
		n, _, err := syscall.Recvfrom(fd, b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil || err != nil && err != syscall.EAGAIN && err != syscall.EINTR
	})
	return closed
}
