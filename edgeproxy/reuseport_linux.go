//go:build linux

package edgeproxy

import (
	"syscall"
)

// reusePortControl sets SO_REUSEPORT on a listening socket before bind, so a
// new edge process can bind the public address while the old one drains.
func reusePortControl(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf /* SO_REUSEPORT */, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

const reusePortSupported = true
