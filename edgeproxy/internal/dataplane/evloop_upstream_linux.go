//go:build linux

package dataplane

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/evloop"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// startExchange writes c's request to an idle backend connection, or
// dials one.
func (l *evLoop) startExchange(c *evClient) {
	rt := c.ex.Route
	c.rhDeadline = time.Time{}
	t := c.ex.Backend.Transport
	var u *evUp
	if !c.retried {
		// A retry dials: the pool's other connections may be as dead as
		// the one that failed (a backend that closed them all).
		u = l.idle(t)
	}
	if u == nil {
		var err error
		if u, err = l.dial(t, rt.Timeouts.Dial); err != nil {
			c.ex.err = err
			l.giveUpExchange(c, nil)
			return
		}
	}
	u.c, c.up = c, u
	if !u.connecting {
		l.send(c)
	}
}

// idle returns a pooled connection to t, or nil.
func (l *evLoop) idle(t *upstream.Transport) *evUp {
	pool := l.pools[t]
	for len(pool) > 0 {
		u := pool[len(pool)-1]
		pool[len(pool)-1] = nil
		pool = pool[:len(pool)-1]
		if u.closes == t.Closes() && l.now.Sub(u.idleSince) < t.IdleTimeout() {
			l.pools[t] = pool
			u.reused = true
			return u
		}
		l.closeUp(u)
	}
	l.pools[t] = pool
	return nil
}

// dial starts a non-blocking connect to t (timeout: the route's dial
// timeout or the transport's).
func (l *evLoop) dial(t *upstream.Transport, timeout time.Duration) (*evUp, error) {
	fd, connecting, err := evloop.Dial(t.LoopAddr())
	if err != nil {
		return nil, err
	}
	u := &evUp{fd: fd, t: t, serial: l.p.NextSerial(evloop.TagUp)}
	if connecting {
		u.connecting = true
		if timeout <= 0 {
			timeout = t.DialTimeout()
		}
		u.dialDeadline = l.now.Add(timeout)
		l.sweepBy(u.dialDeadline)
	}
	if err := l.p.Add(fd, unix.EPOLLIN|unix.EPOLLOUT|unix.EPOLLRDHUP|unix.EPOLLET, u.serial); err != nil {
		_ = unix.Close(fd)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("epoll_ctl", err)}
	}
	l.ups[int32(fd)] = u
	return u, nil
}

// send writes c's request head to its backend connection.
func (l *evLoop) send(c *evClient) {
	u := c.up
	l.out = l.out[:0]
	l.bw.Reset((*evSink)(l))
	c.hc.WriteOutgoing(l.bw)
	_ = l.bw.Flush()
	m, err := evloop.RawWrite(u.fd, l.out)
	if err != nil || m != len(l.out) {
		// A kept-alive connection the backend closed, or (never seen: the
		// send buffer of an idle connection is empty) a short write.
		l.closeUp(u)
		c.up = nil
		if err == nil {
			err = upstream.ErrNotSent
		}
		c.ex.err = &net.OpError{Op: "write", Net: "tcp", Err: err}
		l.retryOrGiveUp(c, u.reused)
		return
	}
	// The response header timeout runs from the request written (as
	// exchangeH1 arms it).
	if d := c.ex.Route.Timeouts.ResponseHeader; d > 0 {
		c.rhDeadline = l.now.Add(d)
		l.sweepBy(c.rhDeadline)
	}
}

// retryOrGiveUp retries a request whose reused backend connection failed
// before any answer once on another connection (GET and HEAD are
// idempotent), as exchangeH1 does; otherwise the goroutine answers the
// error page.
func (l *evLoop) retryOrGiveUp(c *evClient, reused bool) {
	if reused && !c.retried {
		c.retried = true
		c.ex.err = nil
		l.startExchange(c)
		return
	}
	l.giveUpExchange(c, nil)
}

// onUp handles events of a backend connection.
func (l *evLoop) onUp(u *evUp, ev uint32) {
	c := u.c
	if c == nil {
		// Idle: bytes or a close from the backend. Either way it cannot
		// carry a request any more (unsolicited bytes would be read as the
		// next client's answer).
		if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
			l.unpool(u)
			l.closeUp(u)
		}
		return
	}
	if u.connecting {
		if ev&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
			return
		}
		u.connecting = false
		if errno, err := unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || errno != 0 {
			if err == nil {
				err = unix.Errno(errno)
			}
			l.closeUp(u)
			c.up = nil
			c.ex.err = &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(u.t.LoopAddr()), Err: os.NewSyscallError("connect", err)}
			l.giveUpExchange(c, nil)
			return
		}
		l.send(c)
		if c.up != u {
			return // the write failed: retried elsewhere or given up
		}
		// Fall through: an answer that came with the connect completion
		// (a backend that speaks first) was in this same event.
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		l.readUp(u, ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0)
	}
}

// readUp reads the answer and, once it is whole, relays it. hup says the
// event also reported the backend's close (or an error): then a short read
// does not mean drained, the socket is read on to its end of file, which
// no later event would report (edge-triggered), so a backend that writes
// part of an answer and closes at once gets its 502 or truncated body.
func (l *evLoop) readUp(u *evUp, hup bool) {
	c := u.c
	if u.buf == nil {
		u.buf = make([]byte, EvMaxResponse)
	}
	var rerr error
	drained := false
	for u.n < len(u.buf) {
		m, err := evloop.RawRead(u.fd, u.buf[u.n:])
		if err == unix.EAGAIN {
			drained = true
			break
		}
		if err != nil {
			rerr = os.NewSyscallError("read", err)
			break
		}
		if m == 0 {
			rerr = io.EOF
			break
		}
		space := len(u.buf) - u.n
		u.n += m
		if m < space && !hup {
			drained = true
			break
		}
	}
	if u.n == 0 {
		if rerr == nil {
			return
		}
		// Closed before any answer: a kept-alive connection the backend
		// had closed (retried once), or a failed backend.
		l.closeUp(u)
		c.up = nil
		c.ex.err = &net.OpError{Op: "read", Net: "tcp", Err: rerr}
		if errors.Is(rerr, io.EOF) {
			c.ex.err = io.ErrUnexpectedEOF
		}
		l.retryOrGiveUp(c, u.reused)
		return
	}
	buf := u.buf[:u.n]
	headLen := headEnd(buf)
	if headLen < 0 {
		if rerr != nil || u.n == len(u.buf) {
			l.giveUpExchange(c, u) // the goroutine reads (or rejects) the rest
		}
		return
	}
	resp := &c.hc.resp
	if headLen == 0 || h1wire.ParseResponse(buf[:headLen], resp, c.hc.Req.Head) != nil || resp.Code < 200 ||
		resp.Code == 101 || resp.Chunked || resp.UntilClose {
		l.giveUpExchange(c, u)
		return
	}
	c.rhDeadline = time.Time{} // the head came: no response header timeout any more
	total := headLen
	if !resp.NoBody {
		if resp.Length > int64(len(u.buf)-total) {
			l.giveUpExchange(c, u) // large: streamed by a goroutine
			return
		}
		total += int(resp.Length)
	}
	if u.n < total {
		if rerr != nil {
			l.giveUpExchange(c, u)
		}
		return // the rest of the body is coming
	}
	// Reused only when nothing followed the answer: the socket was
	// drained and held no more than the answer.
	reusable := rerr == nil && drained && !resp.Close && u.n == total
	keep := !c.hc.Req.Close && !l.h.Shutting.Load()
	l.out = l.out[:0]
	l.bw.Reset((*evSink)(l))
	writeResponseHead(l.bw, resp, keep, "") // plain HTTP: no HSTS
	_ = l.bw.Flush()
	if !resp.NoBody {
		l.out = append(l.out, buf[headLen:total]...)
		c.ex.Acc.BytesOut = int64(total - headLen)
	}
	// Out of the drain's count before the client has its answer (as the
	// goroutine path does).
	DoneH1(&c.ex, resp.Code, 0)
	c.up = nil
	if reusable {
		l.pool(u)
	} else {
		l.closeUp(u)
	}
	c.hc.resp = h1wire.Response{Headers: resp.Headers[:0], ConnNames: resp.ConnNames[:0]}
	l.s.Metrics.LoopRequests.Inc()
	l.answered(c, keep)
}

// headEnd returns the length of the message head at the start of b,
// through its empty line (lines end in CRLF or a bare LF, as readHead
// reads them), or -1 when b holds no whole head; 0 when b starts with an
// empty line (left to readHead).
func headEnd(b []byte) int {
	start := 0
	for {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			return -1
		}
		line := b[start : start+i]
		if len(line) == 0 || len(line) == 1 && line[0] == '\r' {
			if start == 0 {
				return 0
			}
			return start + i + 1
		}
		start += i + 1
	}
}

// pool keeps u for t's next request in this loop.
func (l *evLoop) pool(u *evUp) {
	u.c = nil
	u.n = 0
	u.reused = false
	t := u.t
	if t.Retired() || len(l.pools[t]) >= evMaxIdle {
		l.closeUp(u)
		return
	}
	u.idleSince = l.now
	u.closes = t.Closes()
	l.pools[t] = append(l.pools[t], u)
}

// unpool drops u from its pool.
func (l *evLoop) unpool(u *evUp) {
	pool := l.pools[u.t]
	for i, v := range pool {
		if v == u {
			pool[i] = pool[len(pool)-1]
			pool[len(pool)-1] = nil
			l.pools[u.t] = pool[:len(pool)-1]
			return
		}
	}
}

func (l *evLoop) closeUp(u *evUp) {
	if u.fd >= 0 {
		delete(l.ups, int32(u.fd))
		_ = unix.Close(u.fd)
		u.fd = -1
	}
}
