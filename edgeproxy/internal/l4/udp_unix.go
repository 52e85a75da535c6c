//go:build unix

package l4

import (
	"net"
	"syscall"
)

// datagramReader reads a connected UDP socket's datagrams into pooled
// buffers taken only once a datagram is there (RawConn.Read waits for
// readability without a buffer).
type datagramReader struct {
	c  *net.UDPConn
	rc syscall.RawConn
}

func newDatagramReader(c *net.UDPConn) *datagramReader {
	rc, _ := c.SyscallConn()
	return &datagramReader{c: c, rc: rc}
}

// read returns the next datagram in a buffer from datagramPool (the caller
// puts it back) and its length; errors are the connection's (deadline,
// closed).
func (r *datagramReader) read() (*[maxDatagram]byte, int, error) {
	if r.rc == nil {
		buf := datagramPool.Get().(*[maxDatagram]byte)
		n, err := r.c.Read(buf[:])
		if err != nil {
			datagramPool.Put(buf)
			return nil, 0, err
		}
		return buf, n, nil
	}
	var buf *[maxDatagram]byte
	var n int
	var rerr error
	err := r.rc.Read(func(fd uintptr) bool {
		buf = datagramPool.Get().(*[maxDatagram]byte)
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_DONTWAIT)
		if rerr == syscall.EAGAIN {
			datagramPool.Put(buf)
			buf = nil
			return false // wait for the next datagram without a buffer
		}
		return true
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		if buf != nil {
			datagramPool.Put(buf)
		}
		return nil, 0, err
	}
	return buf, n, nil
}

// descriptorLimit is the process's open descriptor limit (soft; Go raises
// it to the hard limit at start).
func descriptorLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 20
	}
	return int(rl.Cur)
}
