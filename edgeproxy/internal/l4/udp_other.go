//go:build !unix

package l4

import "net"

type datagramReader struct{ c *net.UDPConn }

func newDatagramReader(c *net.UDPConn) *datagramReader { return &datagramReader{c: c} }

func (r *datagramReader) read() (*[maxDatagram]byte, int, error) {
	buf := datagramPool.Get().(*[maxDatagram]byte)
	n, err := r.c.Read(buf[:])
	if err != nil {
		datagramPool.Put(buf)
		return nil, 0, err
	}
	return buf, n, nil
}

func descriptorLimit() int { return 1 << 20 }
