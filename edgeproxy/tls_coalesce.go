package edgeproxy

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// coalesceConn is the TCP connection under an HTTPS connection. Once
// enabled (an HTTP/2 connection), writes are collected and sent by one
// flusher goroutine that first lets the goroutines already runnable go
// (handlers whose backend answered in the same wake-up), so the answers of
// several streams share one write system call instead of one each (the
// HTTP/2 server flushes whenever its write queue empties). A write error
// is returned by the next Write. Close never waits: with a write pending
// the flusher closes the connection once it went out (closeFlushWait at
// most). Disabled (HTTP/1.1, the handshake), it is the connection itself.
type coalesceConn struct {
	net.Conn
	on atomic.Bool

	mu       sync.Mutex
	cond     sync.Cond
	buf      []byte // pending, appended by Write
	spare    []byte // the flusher's buffer, between flushes
	flushing bool
	// closeAfter: Close came while flushing; the flusher closes.
	closeAfter bool
	err        error
}

// coalesceMaxPending bounds the bytes a Write may leave pending: past it
// Write waits for the flusher (a client that does not read slows its
// handlers as before).
const coalesceMaxPending = 64 << 10

// closeFlushWait bounds how long pending bytes may take to go out after
// Close.
const closeFlushWait = time.Second

func newCoalesceConn(c net.Conn) *coalesceConn {
	cc := &coalesceConn{Conn: c}
	cc.cond.L = &cc.mu
	return cc
}

// enable turns coalescing on (after the handshake, before any write of
// the HTTP/2 server).
func (c *coalesceConn) enable() { c.on.Store(true) }

func (c *coalesceConn) Write(p []byte) (int, error) {
	if !c.on.Load() {
		return c.Conn.Write(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.buf) >= coalesceMaxPending && c.err == nil && !c.closeAfter {
		c.cond.Wait()
	}
	if c.closeAfter {
		return 0, net.ErrClosed
	}
	if c.err != nil {
		return 0, c.err
	}
	c.buf = append(c.buf, p...)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
	return len(p), nil
}

// flush writes what is pending until nothing is.
func (c *coalesceConn) flush() {
	runtime.Gosched() // let the writes of goroutines already runnable join
	c.mu.Lock()
	for len(c.buf) > 0 && c.err == nil {
		out := c.buf
		c.buf = c.spare[:0]
		c.spare = nil
		c.cond.Broadcast()
		c.mu.Unlock()
		_, err := c.Conn.Write(out)
		c.mu.Lock()
		if err != nil {
			c.err = err
		}
		if cap(out) <= 2*coalesceMaxPending {
			c.spare = out[:0]
		}
	}
	if cap(c.buf) > 16<<10 {
		c.buf = nil // an idle connection keeps no large buffer
	}
	if cap(c.spare) > 16<<10 {
		c.spare = nil
	}
	c.flushing = false
	closeNow := c.closeAfter
	if closeNow {
		c.err = net.ErrClosed
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	if closeNow {
		_ = c.Conn.Close()
	}
}

// Close closes the connection, or, while a write is pending, has the
// flusher close it once the write is done (bounded by closeFlushWait).
// Later writes fail.
func (c *coalesceConn) Close() error {
	if !c.on.Load() {
		return c.Conn.Close()
	}
	c.mu.Lock()
	if c.flushing && c.err == nil {
		c.closeAfter = true
		c.cond.Broadcast()
		c.mu.Unlock()
		return c.Conn.SetWriteDeadline(time.Now().Add(closeFlushWait))
	}
	c.err = net.ErrClosed
	c.cond.Broadcast()
	c.mu.Unlock()
	return c.Conn.Close()
}
