//go:build linux

package dataplane

import (
	"net"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/handoff"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// giveUpExchange hands c, with its exchange in progress, to a goroutine:
// u (when not nil) is the backend connection the request was written to,
// with what it answered so far replayed to the goroutine.
func (l *evLoop) giveUpExchange(c *evClient, u *evUp) {
	ex := c.ex
	if u != nil {
		c.up = nil
		fc, err := l.release(u.fd, u.buf[:u.n])
		delete(l.ups, int32(u.fd))
		u.fd = -1
		if err != nil {
			ex.err = err
		} else {
			ex.sent, ex.reused = fc, u.reused
			if !c.rhDeadline.IsZero() {
				ex.rhLeft = c.rhDeadline.Sub(l.now)
				if ex.rhLeft <= 0 {
					_ = fc.C.Close()
					ex.sent, ex.err = nil, upstream.ErrResponseHeaderTimeout
				}
			}
		}
	}
	head := append([]byte(nil), c.buf[:c.headLen]...)
	c.hc.head = head
	l.giveUp(c, &h1Resume{ex: &ex}, c.buf[c.headLen:c.n])
}

// release takes fd out of the loop as a net.Conn (on Go's poller) that
// replays prefix first.
func (l *evLoop) release(fd int, prefix []byte) (*upstream.Conn, error) {
	nc, err := l.p.Release(fd)
	if err != nil {
		return nil, err
	}
	var conn net.Conn = nc
	if len(prefix) > 0 {
		conn = &handoff.ReplayConn{Conn: nc, Prefix: append([]byte(nil), prefix...)}
	}
	return upstream.NewConn(conn), nil
}

// giveUp hands client connection c to a goroutine (RunConn), which
// finishes res (nil: nothing in progress) and serves the connection from
// then on, reading prefix first.
func (l *evLoop) giveUp(c *evClient, res *h1Resume, prefix []byte) {
	l.s.Metrics.LoopHandoffs.Inc()
	delete(l.clients, int32(c.fd))
	fc, err := l.release(c.fd, prefix)
	c.fd = -1
	if err != nil {
		l.s.Logger.Warn("event loop: cannot hand a connection over", "error", err)
		if res != nil && res.ex != nil {
			if res.ex.sent != nil {
				_ = res.ex.sent.C.Close()
			}
			DoneH1(res.ex, StatusClientClosed, 0)
		}
		l.h.WG.Done()
		return
	}
	if l.force.Load() {
		// Shutdown ran out of time: ConnServer.shutdown has made its last
		// pass over h.conns; a connection registered now would be missed.
		_ = fc.C.Close()
		if res != nil && res.ex != nil {
			if res.ex.sent != nil {
				_ = res.ex.sent.C.Close()
			}
			DoneH1(res.ex, StatusClientClosed, 0)
		}
		l.h.WG.Done()
		return
	}
	hc := &H1Conn{Conn: fc.C}
	if res != nil && res.ex != nil {
		hc.head = c.hc.head
		if !h1wire.ParseRequest(hc.head, &hc.Req) {
			panic("edgeproxy: a request the loop parsed does not parse again")
		}
		hc.Req.GenID = c.hc.Req.GenID // sent by the loop: the access log names it
	}
	if res != nil {
		hc.state.Store(h1Active)
	}
	if c.eof && res == nil && len(prefix) == 0 {
		_ = fc.C.Close()
		l.h.WG.Done()
		return
	}
	h := l.h
	h.Mu.Lock()
	h.Conns[hc] = struct{}{} // counted in h.wg since it was adopted
	h.Mu.Unlock()
	go h.RunConn(hc, res)
}
