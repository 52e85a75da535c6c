//go:build linux

package evloop

import (
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// Dial starts a non-blocking TCP connect to ap (TCP_NODELAY and
// SO_KEEPALIVE set). connecting says the connect is in progress: its end
// is an EPOLLOUT event, and SO_ERROR tells how it went. The error is a
// *net.OpError (Op "dial") around the failed system call; fd is then -1.
func Dial(ap netip.AddrPort) (fd int, connecting bool, err error) {
	family := unix.AF_INET
	var sa unix.Sockaddr
	if ap.Addr().Unmap().Is4() {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}
	} else {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, false, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", err)}
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	if err := unix.Connect(fd, sa); err != nil {
		if err != unix.EINPROGRESS {
			_ = unix.Close(fd)
			return -1, false, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: os.NewSyscallError("connect", err)}
		}
		return fd, true, nil
	}
	return fd, false, nil
}

// PeerAddr returns the address of fd's peer (a *net.TCPAddr; an empty one
// for a socket that is neither IPv4 nor IPv6). The error is getpeername's
// errno.
func PeerAddr(fd int) (net.Addr, error) {
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return nil, err
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}, nil
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}, nil
	}
	return &net.TCPAddr{}, nil
}
