//go:build unix

package edgeproxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// runEdge runs an edge with cfg and returns it with the channel Run's
// result arrives on; the edge is stopped at test cleanup.
func runEdge(t *testing.T, cfg edgeproxy.Config) (*edgeproxy.Server, <-chan error) {
	t.Helper()
	return runServer(t, edgeproxy.New(cfg))
}

// runServer is runEdge for an edge already created.
func runServer(t *testing.T, srv *edgeproxy.Server) (*edgeproxy.Server, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(cancel)
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("edge exited before ready: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("edge not ready within 5s")
	}
	return srv, done
}

// sseBackend serves "/" (ok), "/slow" (ok after 400 ms) and "/sse" (an
// event every 50 ms until the client goes).
func sseBackend(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			time.Sleep(400 * time.Millisecond)
		case "/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

// R60 (listener hand-over): a new edge on the same state directory takes
// the running edge's listeners over through handover.sock while 16 clients
// (half keep-alive, half a new connection per request) and one SSE stream
// run: no request fails, a request in flight on the old edge completes, a
// relayed TCP connection stays on the old edge while new ones reach the new
// edge, and the old edge's Run returns once drained (the SSE stream ends at
// the drain bound, after having continued across the hand-over).
func TestR60_HandoverUnderLoadDropsNothing(t *testing.T) {
	backend := sseBackend(t)
	echo := echoTCP(t, "echo")
	state := t.TempDir()
	httpAddr, adminAddr, tcpAddr := freePort(t), freePort(t), freePort(t)
	const bound = 1500 * time.Millisecond
	cfg := edgeproxy.Config{
		StateDir:        state,
		HTTPAddr:        httpAddr,
		AdminAddr:       adminAddr,
		PollInterval:    20 * time.Millisecond,
		DialTimeout:     time.Second,
		ShutdownTimeout: bound,
	}
	old, oldDone := runEdge(t, cfg)
	table := httpTable(1, route("app.test", addrOf(backend)))
	table.TCP = []routetable.L4Route{tcpRoute(tcpAddr, echo)}
	(&edge{srv: old, stateDir: state}).publish(t, table)

	// A relayed TCP connection opened on the old edge.
	tc, err := net.Dial("tcp", tcpAddr)
	require.NoError(t, err)
	defer tc.Close()
	tr := bufio.NewReader(tc)
	assert.Equal(t, "echo:before\n", roundTrip(t, tc, tr, "before"))

	// The load: 8 keep-alive clients, 8 with a new connection per request.
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 16 {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: i%2 == 1}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 100000; n++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/", nil)
				req.Host = "app.test"
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				ok.Add(1)
			}
		}()
	}

	// One SSE stream and one slow request, both on the old edge.
	sseReq, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/sse", nil)
	sseReq.Host = "app.test"
	sseResp, err := http.DefaultClient.Do(sseReq)
	require.NoError(t, err)
	defer sseResp.Body.Close()
	var sseLast atomic.Int64 // unix nano of the last event
	sseEnded := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(sseResp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				sseLast.Store(time.Now().UnixNano())
			}
		}
		sseEnded <- sc.Err()
	}()
	slowDone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/slow", nil)
		req.Host = "app.test"
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(b) != "ok" {
				err = fmt.Errorf("slow: %d %q", resp.StatusCode, b)
			}
		}
		slowDone <- err
	}()
	time.Sleep(300 * time.Millisecond)
	require.Positive(t, ok.Load(), "load runs before the hand-over")

	handoverAt := time.Now()
	next, nextDone := runEdge(t, cfg)
	assert.Equal(t, httpAddr, next.HTTPAddr())
	assert.Equal(t, adminAddr, next.AdminAddr())

	// The relayed connection stays on the old edge; a new one goes to the
	// new edge.
	assert.Equal(t, "echo:after\n", roundTrip(t, tc, tr, "after"))
	tc2, err := net.Dial("tcp", tcpAddr)
	require.NoError(t, err)
	defer tc2.Close()
	assert.Equal(t, "echo:new\n", roundTrip(t, tc2, bufio.NewReader(tc2), "new"))
	// Counted at once: the relay counts a connection before it dials.
	require.Equal(t, int64(1), openConns(next.Status(), echo), "the new edge relays the connection made after it was ready")

	require.NoError(t, <-slowDone, "the request in flight on the old edge completes")
	select {
	case err := <-oldDone:
		require.NoError(t, err)
	case <-time.After(bound + 3*time.Second):
		t.Fatal("the old edge did not stop after its drain bound")
	}
	drained := time.Since(handoverAt)
	select {
	case <-sseEnded:
	case <-time.After(2 * time.Second):
		t.Fatal("the SSE stream did not end with the old edge")
	}
	last := time.Unix(0, sseLast.Load())
	assert.True(t, last.After(handoverAt.Add(bound/2)), "the SSE stream continued across the hand-over until the bound (last event %v after it)", last.Sub(handoverAt))
	// The relayed TCP connection was cut at the bound, with the old edge.
	_ = tc.SetReadDeadline(time.Now().Add(time.Second))
	_, rerr := tr.ReadByte()
	assert.Error(t, rerr)

	time.Sleep(200 * time.Millisecond) // load on the new edge alone
	close(stop)
	wg.Wait()
	t.Logf("hand-over: %d requests, %d failed, old edge drained in %v", ok.Load()+failed.Load(), failed.Load(), drained.Round(time.Millisecond))
	assert.Zero(t, failed.Load(), "failed requests (first: %v)", firstErr.Load())
	select {
	case err := <-nextDone:
		t.Fatalf("the new edge stopped: %v", err)
	default:
	}
	// The new edge serves the table and owns status.json.
	st := (&edge{srv: next, stateDir: state}).readStatus(t)
	assert.Equal(t, uint64(1), st.AppliedGeneration)
	assert.Equal(t, next.Status().PID, st.PID)
}

// R60: the new edge reports ready only once the old one has stopped
// accepting, even when the old one is slow to act on the confirmation: every
// TCP connection made after that is relayed, and counted in the status, by
// the new edge; none is accepted by the old one (which would cut it at its
// drain bound).
func TestR60_ConnectionsAfterTheHandoverReachTheNewEdge(t *testing.T) {
	echo := echoTCP(t, "echo")
	state := t.TempDir()
	tcpAddr := freePort(t)
	cfg := edgeproxy.Config{
		StateDir:        state,
		HTTPAddr:        freePort(t),
		AdminAddr:       freePort(t),
		PollInterval:    20 * time.Millisecond,
		DialTimeout:     time.Second,
		ShutdownTimeout: 5 * time.Second,
	}
	stopping, release := make(chan struct{}), make(chan struct{})
	oldSrv := edgeproxy.New(cfg)
	edgeproxy.SetStopAcceptHook(oldSrv, func() { close(stopping); <-release })
	old, oldDone := runServer(t, oldSrv)
	releaseOld := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOld)
	table := httpTable(1)
	table.TCP = []routetable.L4Route{tcpRoute(tcpAddr, echo)}
	(&edge{srv: old, stateDir: state}).publish(t, table)
	dial := func(msg string) net.Conn {
		c, err := net.Dial("tcp", tcpAddr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.Equal(t, "echo:"+msg+"\n", roundTrip(t, c, bufio.NewReader(c), msg))
		return c
	}
	first := dial("old")

	next := edgeproxy.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nextDone := make(chan error, 1)
	go func() { nextDone <- next.Run(ctx) }()
	select {
	case <-stopping:
	case err := <-nextDone:
		t.Fatalf("new edge exited: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the old edge never got the hand-over's confirmation")
	}
	// The old edge holds where it stops accepting: the new one is not
	// ready meanwhile.
	select {
	case <-next.Ready():
		t.Error("the new edge reported ready while the old one still accepted connections")
	case <-time.After(300 * time.Millisecond):
	}
	releaseOld()
	select {
	case <-next.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("new edge not ready")
	}
	const n = 8
	for i := range n {
		dial(fmt.Sprint("new", i))
	}
	// Counted at once: the relay counts a connection before it dials.
	assert.Equal(t, int64(n), openConns(next.Status(), echo), "connections relayed by the new edge")
	assert.Equal(t, int64(1), openConns(old.Status(), echo), "connections relayed by the old edge")
	_ = first.Close() // the old edge's drain ends with it
	require.NoError(t, <-oldDone)
	cancel()
	require.NoError(t, <-nextDone)
}

// R60: a new edge that dies before it confirms leaves the old one serving;
// the hand-over socket stays usable for the next attempt.
func TestR60_UnconfirmedHandoverKeepsOldServing(t *testing.T) {
	backend := nameBackend(t, "b")
	state := t.TempDir()
	httpAddr := freePort(t)
	cfg := edgeproxy.Config{StateDir: state, HTTPAddr: httpAddr, PollInterval: 20 * time.Millisecond, ShutdownTimeout: time.Second}
	old, oldDone := runEdge(t, cfg)
	e := &edge{srv: old, stateDir: state, client: &http.Client{Timeout: 3 * time.Second}}
	e.publish(t, httpTable(1, route("app.test", addrOf(backend))))

	// A second edge whose admin address cannot be bound fails after taking
	// the listeners but before confirming.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	bad := cfg
	bad.AdminAddr = busy.Addr().String()
	err = edgeproxy.New(bad).Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listen admin")

	select {
	case err := <-oldDone:
		t.Fatalf("the old edge stopped: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	code, body := e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "b", body)

	// The next attempt succeeds.
	next, _ := runEdge(t, cfg)
	assert.Equal(t, httpAddr, next.HTTPAddr())
	select {
	case err := <-oldDone:
		require.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("the old edge did not stop after the hand-over")
	}
}
