package edgeproxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Coalesced writes arrive whole and in order, what is pending is sent
// before Close closes, and a write error comes back from a later Write.
func TestCoalesceConnDeliversInOrderFlushesOnCloseAndReportsErrors(t *testing.T) {
	a, b := net.Pipe()
	cc := newCoalesceConn(a)
	cc.enable()
	got := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(b)
		got <- all
	}()
	var want bytes.Buffer
	var mu sync.Mutex // one writer at a time, as the HTTP/2 server writes
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				mu.Lock()
				msg := fmt.Sprintf("g%d-%d;", g, i)
				want.WriteString(msg)
				n, err := cc.Write([]byte(msg))
				mu.Unlock()
				assert.NoError(t, err)
				assert.Equal(t, len(msg), n)
			}
		}()
	}
	wg.Wait()
	_, err := cc.Write(bytes.Repeat([]byte("x"), 3*coalesceMaxPending)) // over the bound: waits, then goes
	require.NoError(t, err)
	want.Write(bytes.Repeat([]byte("x"), 3*coalesceMaxPending))
	require.NoError(t, cc.Close())
	select {
	case all := <-got:
		assert.Equal(t, want.String(), string(all), "every byte, in order, before the close")
	case <-time.After(5 * time.Second):
		t.Fatal("reader never saw the close")
	}

	c, d := net.Pipe()
	cc = newCoalesceConn(c)
	cc.enable()
	require.NoError(t, d.Close())
	_, _ = cc.Write([]byte("lost"))
	assert.Eventually(t, func() bool {
		_, err := cc.Write([]byte("more"))
		return err != nil
	}, 5*time.Second, time.Millisecond, "the failed write is reported")
	_ = cc.Close()

	e, f := net.Pipe()
	cc = newCoalesceConn(e) // not enabled: the connection itself
	go func() { _, _ = cc.Write([]byte("direct")) }()
	buf := make([]byte, 6)
	_, err = io.ReadFull(f, buf)
	require.NoError(t, err)
	assert.Equal(t, "direct", string(buf))
	_ = cc.Close()
	_ = f.Close()
}

// Close never waits for a peer that does not read: it returns at once,
// and the connection is closed within closeFlushWait.
func TestCoalesceConnCloseDoesNotWaitForAPeerThatDoesNotRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			peer <- c
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	p := <-peer
	defer p.Close() // never reads
	cc := newCoalesceConn(c)
	cc.enable()
	chunk := bytes.Repeat([]byte("y"), 32<<10)
	blocked := make(chan struct{})
	go func() {
		defer close(blocked)
		for {
			if _, err := cc.Write(chunk); err != nil {
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // socket buffers full: the flusher is stuck
	start := time.Now()
	require.NoError(t, cc.Close())
	assert.Less(t, time.Since(start), 100*time.Millisecond, "Close returned at once")
	select {
	case <-blocked: // the writer was released with an error
	case <-time.After(closeFlushWait + 3*time.Second):
		t.Fatal("a writer stayed blocked after Close")
	}
	_, err = cc.Write([]byte("late"))
	assert.Error(t, err, "writes after Close fail")
}
