package tcpprobe_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	tcpprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/tcp"
)

// serve listens on 127.0.0.1 and runs handle on every accepted connection.
func serve(t *testing.T, handle func(*net.TCPConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				handle(c.(*net.TCPConn))
			}()
		}
	}()
	return ln.Addr().String()
}

// holdOpen keeps the connection open silently until the peer goes away.
func holdOpen(c *net.TCPConn) {
	defer c.Close()
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, _ = c.Read(b[:])
}

func req(addr string) core.ProbeRequest {
	return core.ProbeRequest{
		Target:    core.ProbeTarget{App: "blog", Service: "db", ContainerID: "c-new", Address: addr, Port: 9000},
		Readiness: core.Readiness{Type: core.ReadinessTCP, Port: 9000},
	}
}

func TestS34_AcceptThenCloseIsClosedAfterAccept(t *testing.T) {
	addr := serve(t, func(c *net.TCPConn) { c.Close() })
	err := tcpprobe.Attempt(context.Background(), addr, 2*time.Second)
	require.ErrorIs(t, err, tcpprobe.ErrClosedAfterAccept)
	assert.Equal(t, "connection closed right after accept", tcpprobe.ErrClosedAfterAccept.Error())

	res, err := tcpprobe.New().Check(context.Background(), req(addr))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "connection closed right after accept")
	assert.True(t, core.IsClosedAfterAccept(res.Detail), "matchable across the wire")
}

func TestS35_ResetIsError(t *testing.T) {
	addr := serve(t, func(c *net.TCPConn) {
		_ = c.SetLinger(0)
		c.Close()
	})
	err := tcpprobe.Attempt(context.Background(), addr, 2*time.Second)
	require.Error(t, err)
	assert.NotErrorIs(t, err, tcpprobe.ErrClosedAfterAccept)
	assert.Contains(t, err.Error(), addr)

	res, err := tcpprobe.New().Check(context.Background(), req(addr))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.NotEmpty(t, res.Detail)
	assert.False(t, core.IsClosedAfterAccept(res.Detail))
}

func TestS36_SilentListenerReadyAfterSettle(t *testing.T) {
	addr := serve(t, holdOpen)
	p := tcpprobe.NewWithSettle(300 * time.Millisecond)
	start := time.Now()
	res, err := p.Check(context.Background(), req(addr))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestS37_BannerReadyFastWithLongSettle(t *testing.T) {
	addr := serve(t, func(c *net.TCPConn) {
		defer c.Close()
		_, _ = c.Write([]byte("220 ready\r\n"))
		holdOpen(c)
	})
	p := tcpprobe.NewWithSettle(5 * time.Second)
	start := time.Now()
	res, err := p.Check(context.Background(), req(addr))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestS37_BannerThenCloseIsReady(t *testing.T) {
	addr := serve(t, func(c *net.TCPConn) {
		_, _ = c.Write([]byte("x"))
		c.Close()
	})
	require.NoError(t, tcpprobe.Attempt(context.Background(), addr, 5*time.Second))
}

func TestS38_NoListenerIsError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	res, err := tcpprobe.New().Check(context.Background(), req(addr))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "connect "+addr)
	assert.Contains(t, res.Detail, "refused")
}

func TestS39_PreCancelledContextIsError(t *testing.T) {
	addr := serve(t, func(c *net.TCPConn) {
		defer c.Close()
		_, _ = c.Write([]byte("220 ready\r\n"))
		holdOpen(c)
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := tcpprobe.New().Check(ctx, req(addr))
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, res.Ready)
	assert.ErrorIs(t, tcpprobe.Attempt(ctx, addr, time.Second), context.Canceled)
}

func TestS40_ContextInterruptsLongSettle(t *testing.T) {
	addr := serve(t, holdOpen)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := tcpprobe.NewWithSettle(10*time.Second).Check(ctx, req(addr))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, context.DeadlineExceeded, err, "ctx's error as is (R32.3)")
	assert.False(t, res.Ready)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestR32_ContextEndWinsOverArrivedData(t *testing.T) {
	// The banner is sent only after the caller's context has ended: the
	// attempt must return the context's error even though data arrives.
	ctx, cancel := context.WithCancel(context.Background())
	addr := serve(t, func(c *net.TCPConn) {
		defer c.Close()
		cancel()
		_, _ = c.Write([]byte("late banner"))
		holdOpen(c)
	})
	err := tcpprobe.Attempt(ctx, addr, 5*time.Second)
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
}

func TestR32_EmptyAddressIsInvalid(t *testing.T) {
	_, err := tcpprobe.New().Check(context.Background(), core.ProbeRequest{Target: core.ProbeTarget{App: "blog", Service: "db"}})
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "db")
}

func TestR33_WaiterOverRealSocketsReportsTimeout(t *testing.T) {
	addr := serve(t, func(c *net.TCPConn) { c.Close() })
	w := &engine.ReadinessWaiter{Probes: probeSet{tcpprobe.New()}, TCPInterval: 50 * time.Millisecond}
	target := req(addr).Target
	start := time.Now()
	res, err := w.Wait(context.Background(), target, core.Readiness{Type: core.ReadinessTCP, Port: 9000, Timeout: core.Duration(400 * time.Millisecond)}, nil)
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "TCP readiness timeout after 400ms on "+addr)
	assert.Contains(t, err.Error(), "connection closed right after accept")
	assert.GreaterOrEqual(t, res.Attempts, 2)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestR33_WaiterOverRealSocketsBecomesReady(t *testing.T) {
	// Nothing listens at first; a listener appears on the same port later.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	failed := make(chan struct{})
	var once sync.Once
	progress := func(engine.WaitResult) { once.Do(func() { close(failed) }) }
	go func() {
		<-failed // the listener appears after an attempt found none
		ln2, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		t.Cleanup(func() { ln2.Close() })
		for {
			c, err := ln2.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hi"))
			c.Close()
		}
	}()
	w := &engine.ReadinessWaiter{Probes: probeSet{tcpprobe.New()}, TCPInterval: 50 * time.Millisecond}
	res, err := w.Wait(context.Background(), req(addr).Target, core.Readiness{Type: core.ReadinessTCP, Port: 9000, Timeout: core.Duration(5 * time.Second)}, progress)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, res.Attempts, 2)
}

func TestR32_DescribeAndValidate(t *testing.T) {
	p := tcpprobe.New()
	info, err := p.Describe(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "tcp", info.Name)
	assert.Equal(t, 1, info.Protocol)
	for _, ok := range []string{"", "null", "{}"} {
		msgs, err := p.ValidateConfig(context.Background(), json.RawMessage(ok))
		require.NoError(t, err)
		assert.Empty(t, msgs, ok)
	}
	msgs, err := p.ValidateConfig(context.Background(), json.RawMessage(`{"x":1}`))
	require.NoError(t, err)
	assert.Len(t, msgs, 1)
}

type probeSet struct{ p core.Prober }

func (s probeSet) Prober(context.Context, string, string) (core.Prober, error) { return s.p, nil }
