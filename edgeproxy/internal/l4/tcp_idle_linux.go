//go:build linux

package l4

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// silentFor returns how long the TCP connection c has neither received
// nor sent data, as the kernel counts it (TCP_INFO's last_data_recv and
// last_data_sent: bytes spliced without passing through the edge count),
// and false when it cannot tell.
func silentFor(c net.Conn) (time.Duration, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var serr error
	if err := rc.Control(func(fd uintptr) {
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || serr != nil {
		return 0, false
	}
	ms := min(info.Last_data_recv, info.Last_data_sent)
	return time.Duration(ms) * time.Millisecond, true
}
