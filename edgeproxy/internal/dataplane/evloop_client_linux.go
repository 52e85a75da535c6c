//go:build linux

package dataplane

import (
	"bytes"
	"cmp"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/evloop"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

func (l *evLoop) addClient(fd int) {
	c := &evClient{fd: fd, idleSince: l.now, serial: l.p.NextSerial(evloop.TagClient)}
	addr, err := evloop.PeerAddr(fd)
	if err == nil {
		c.hc.PeerInfo(addr, l.s.Reg.Trusted)
	}
	if err != nil || l.p.Add(fd, unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLET, c.serial) != nil {
		_ = unix.Close(fd)
		l.h.WG.Done()
		return
	}
	l.clients[int32(fd)] = c
}

// onClient handles events of a client connection.
func (l *evLoop) onClient(c *evClient, ev uint32) {
	if c.up != nil {
		if ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
			// Gone (or half-closed, which net/http also takes as gone)
			// while its backend works: nobody reads an answer.
			l.closeUp(c.up)
			c.up = nil
			DoneH1(&c.ex, StatusClientClosed, 0)
			l.closeClient(c, 0)
			return
		}
		c.readable = true
		return
	}
	if ev&(unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		l.closeClient(c, 0)
		return
	}
	if ev&unix.EPOLLRDHUP != 0 {
		c.eof = true
	}
	l.readClient(c)
}

// readClient reads what the client sent and serves it.
func (l *evLoop) readClient(c *evClient) {
	if c.buf == nil {
		c.buf = make([]byte, evClientBuf)
	}
	c.readable = false
	for {
		if c.n == len(c.buf) {
			// Full, not drained: no new event will tell of what is
			// still in the socket, so read again once there is room.
			c.readable = true
			break
		}
		m, err := evloop.RawRead(c.fd, c.buf[c.n:])
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			l.closeClient(c, 0)
			return
		}
		if m == 0 {
			c.eof = true
			break
		}
		space := len(c.buf) - c.n
		c.n += m
		if m < space {
			break // drained: epoll reports the next bytes
		}
	}
	l.serveClient(c)
}

// serveClient starts the exchange of the request at the start of c.buf,
// or waits for one, or gives the connection up.
func (l *evLoop) serveClient(c *evClient) {
	if c.n == 0 {
		if c.eof {
			l.closeClient(c, 0)
			return
		}
		c.idleSince = l.now
		return
	}
	end := bytes.Index(c.buf[:c.n], crlfcrlf)
	if end < 0 && c.buf[0] != '\r' && c.buf[0] != '\n' {
		b := c.buf[:c.n]
		switch {
		case c.eof:
			l.closeClient(c, 0) // a head cut by the client
		case c.n == len(c.buf) || bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\n\r\n")):
			// Larger than the loop takes, or ended by bare LFs: the
			// goroutine reads it.
			c.headSince = time.Time{}
			l.giveUp(c, nil, b)
		default:
			// A head in pieces waits here, holding only its buffer, within
			// the read header timeout from its first byte (sweep).
			if c.headSince.IsZero() {
				c.headSince = l.now
				l.sweepBy(l.now.Add(l.h.ReadHeaderTimeout))
			}
		}
		return
	}
	c.headSince = time.Time{}
	if end < 0 {
		l.giveUp(c, nil, c.buf[:c.n]) // leading empty lines
		return
	}
	head := c.buf[:end+4]
	if !h1wire.ParseRequest(head, &c.hc.Req) {
		l.giveUp(c, nil, c.buf[:c.n])
		return
	}
	rt, i, b := l.s.pickH1(c.hc.Req.Host)
	if rt == nil {
		l.giveUp(c, nil, c.buf[:c.n]) // net/http answers 404
		return
	}
	c.ex = Exchange{Route: rt, Index: i, Backend: b, Start: l.now, Acc: ExchangeAccess{hc: &c.hc}}
	c.headLen = len(head)
	c.retried = false
	if !b.Transport.LoopAddr().IsValid() {
		l.giveUpExchange(c, nil)
		return
	}
	l.startExchange(c)
}

// answered writes l.out (a whole answer) to c and goes on with c's next
// request.
func (l *evLoop) answered(c *evClient, keep bool) {
	m, err := evloop.RawWrite(c.fd, l.out)
	if err == unix.EAGAIN {
		m, err = 0, nil
	}
	if err != nil {
		l.closeClient(c, 0)
		return
	}
	// The request is done: what follows its head is the next one.
	c.n = copy(c.buf, c.buf[c.headLen:c.n])
	c.headLen = 0
	if m < len(l.out) {
		// The client is not reading fast enough: a goroutine writes the
		// rest under the send timeout.
		l.giveUp(c, &h1Resume{out: append([]byte(nil), l.out[m:]...), keep: keep}, c.buf[:c.n])
		return
	}
	if !keep {
		l.closeClient(c, 0)
		return
	}
	if c.readable {
		l.readClient(c)
		return
	}
	l.serveClient(c)
}

// closeClient closes c; code, when not 0, is recorded for an exchange in
// progress (shutdown cut it).
func (l *evLoop) closeClient(c *evClient, code int) {
	if c.up != nil {
		l.closeUp(c.up)
		c.up = nil
		DoneH1(&c.ex, cmp.Or(code, StatusClientClosed), 0)
	}
	delete(l.clients, int32(c.fd))
	_ = unix.Close(c.fd)
	c.fd = -1
	l.h.WG.Done()
}
