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
// is returned by the next Write; Close sends what is pending first
// (closeFlushWait at most). Disabled (HTTP/1.1, the handshake), it is the
// connection itself.
type coalesceConn struct {
	net.Conn
	on atomic.Bool

	mu       sync.Mutex
	cond     sync.Cond
	buf      []byte // pending, appended by Write
	spare    []byte // the flusher's buffer, between flushes
	flushing bool
	err      error
}

// coalesceMaxPending bounds the bytes a Write may leave pending: past it
// Write waits for the flusher (a client that does not read slows its
// handlers as before).
const coalesceMaxPending = 64 << 10

// closeFlushWait bounds how long Close waits for pending bytes to go out.
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
	for len(c.buf) >= coalesceMaxPending && c.err == nil {
		c.cond.Wait()
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
	c.cond.Broadcast()
	c.mu.Unlock()
}

// Close sends what is pending (at most closeFlushWait; a blocked write
// is cut by the close), then closes the connection.
func (c *coalesceConn) Close() error {
	if c.on.Load() {
		deadline := time.Now().Add(closeFlushWait)
		c.mu.Lock()
		for c.flushing && c.err == nil && time.Now().Before(deadline) {
			c.mu.Unlock()
			time.Sleep(time.Millisecond)
			c.mu.Lock()
		}
		c.mu.Unlock()
	}
	return c.Conn.Close()
}
