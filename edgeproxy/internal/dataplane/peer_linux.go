//go:build linux

package dataplane

import (
	"net"

	"golang.org/x/sys/unix"
)

// Linux TCP states (include/net/tcp_states.h) in which the peer has closed
// or reset the connection.
const (
	tcpTimeWait  = 6
	tcpClose     = 7
	tcpCloseWait = 8
	tcpLastAck   = 9
	tcpClosing   = 11
)

// PeerClosed reports whether c's peer has closed or reset the connection,
// from the socket's TCP state (TCP_INFO): unlike a peek, this sees a close
// even behind unread bytes the client sent before leaving.
func PeerClosed(c net.Conn) bool {
	closed := false
	c = tcpUnder(c)
	rawControl(c, func(fd int) {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		switch info.State {
		case tcpTimeWait, tcpClose, tcpCloseWait, tcpLastAck, tcpClosing:
			closed = true
		}
	})
	return closed
}
