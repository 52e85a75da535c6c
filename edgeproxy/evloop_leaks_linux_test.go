//go:build linux

package edgeproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

func countFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

type loopEdgeRun struct {
	s    *Server
	stop func() error
}

func startLoopEdgeCfg(t *testing.T, cfg Config, routes ...routetable.HTTPRoute) *loopEdgeRun {
	cfg.StateDir = t.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	if cfg.EventLoops == 0 {
		cfg.EventLoops = 1
	}
	cfg.PollInterval = time.Hour
	s := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-s.Ready()
	require.NoError(t, s.Apply(routetable.Table{Schema: routetable.Schema, Generation: 1, Graph: routetable.Graph{HTTP: routes}}))
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				err = fmt.Errorf("Run did not return within 10s")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return &loopEdgeRun{s: s, stop: stop}
}

func route(backend string, tune ...func(*routetable.HTTPRoute)) routetable.HTTPRoute {
	rt := routetable.HTTPRoute{Host: "app.test", App: "app", Service: "web", Backends: []routetable.Backend{{Addr: backend, Container: "c1"}}}
	for _, f := range tune {
		f(&rt)
	}
	return rt
}

func inFlight(s *Server, backend string) (gauge float64, counter int64) {
	gauge = testutil.ToFloat64(s.Metrics.InFlight.WithLabelValues("app", "web", backend))
	s.Reg.Mu.Lock()
	if b := s.Reg.Backends[backend]; b != nil {
		counter = b.InFlight.Load()
	}
	s.Reg.Mu.Unlock()
	return
}

func oddBackend(t *testing.T) (string, func()) {
	big := strings.Repeat("B", 100<<10)
	mid := strings.Repeat("m", 15<<10)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.Write([]byte("c1 "))
			w.(http.Flusher).Flush()
			w.Write([]byte("c2"))
		case "/big":
			io.WriteString(w, big)
		case "/mid":
			io.WriteString(w, mid)
		case "/slow":
			select {
			case <-time.After(600 * time.Millisecond):
			case <-r.Context().Done():
			}
			io.WriteString(w, "slow")
		case "/hints":
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(103)
			io.WriteString(w, "hinted")
		case "/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "closing")
		case "/nocontent":
			w.WriteHeader(204)
		case "/post":
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "got %s", b)
		default:
			io.WriteString(w, "ok "+r.URL.Path)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }
}

// Every exit path: counts back to 0, no descriptor or goroutine left.
func TestEventLoopOddRequestsLeaveNoCountsOrDescriptors(t *testing.T) {
	runtime.GC()
	fds0, g0 := countFDs(), runtime.NumGoroutine()
	backend, stopBackend := oddBackend(t)
	e := startLoopEdgeCfg(t, Config{DialTimeout: time.Second, ShutdownTimeout: 2 * time.Second, ReadHeaderTimeout: 300 * time.Millisecond},
		route(backend, func(rt *routetable.HTTPRoute) { rt.ResponseHeaderTimeoutMS = 300 }))
	addr := e.s.HTTPAddr()
	send := func(raw string, read bool, closeWhenBusy bool) string {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		io.WriteString(c, raw)
		if closeWhenBusy {
			require.Eventually(t, func() bool { g, _ := inFlight(e.s, backend); return g > 0 }, 10*time.Second, 5*time.Millisecond, "the request reaches the backend")
			return ""
		}
		if !read {
			return ""
		}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b, _ := io.ReadAll(c)
		return string(b)
	}
	g := func(p string) string { return "GET " + p + " HTTP/1.1\r\nHost: app.test\r\n\r\n" }
	gc := func(p string) string { return "GET " + p + " HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n" }
	for range 3 {
		assert.Contains(t, send(gc("/"), true, false), "ok /")
		assert.Contains(t, send(gc("/chunked"), true, false), "c1 ")
		assert.Contains(t, send(gc("/big"), true, false), "BBBB")
		assert.Contains(t, send(gc("/hints"), true, false), "hinted")
		assert.Contains(t, send(gc("/close"), true, false), "closing")
		assert.Contains(t, send(gc("/nocontent"), true, false), "204")
		assert.Contains(t, send(gc("/slow"), true, false), "504")
		assert.Contains(t, send("POST /post HTTP/1.1\r\nHost: app.test\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi", true, false), "got hi")
		assert.Contains(t, send("GET / HTTP/1.1\r\nHost: nope.test\r\nConnection: close\r\n\r\n", true, false), "404")
		assert.Contains(t, send("garbage\r\n\r\n", true, false), "400")
		send("GET / HTTP/1.1\r\nHo", true, false)         // header timeout
		send(g("/slow"), false, true)                     // client gone while busy
		send(g("/"), false, false)                        // gone right away
		send(g("/mid")+g("/mid")+g("/mid"), false, false) // gone mid pipelining
		// half-close after the request
		c, _ := net.Dial("tcp", addr)
		io.WriteString(c, g("/slow"))
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.ReadAll(c)
		c.Close()
		// slow reader of a pipelined mid answer
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) })
		}}
		c, _ = d.Dial("tcp", addr)
		_, handoffs := loopCounts(e.s)
		io.WriteString(c, g("/mid")+g("/mid")+gc("/mid"))
		require.Eventually(t, func() bool { _, h := loopCounts(e.s); return h > handoffs }, 10*time.Second, 5*time.Millisecond, "the answer the client does not take leaves the loop")
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b, _ := io.ReadAll(c)
		assert.Equal(t, 3, strings.Count(string(b), "HTTP/1.1 200"))
		c.Close()
	}
	require.Eventually(t, func() bool { g, c := inFlight(e.s, backend); return g == 0 && c == 0 }, 3*time.Second, 20*time.Millisecond)
	require.NoError(t, e.stop())
	stopBackend()
	gf, cf := inFlight(e.s, backend)
	assert.Equal(t, 0.0, gf)
	assert.Equal(t, int64(0), cf)
	assert.Eventually(t, func() bool { return countFDs() <= fds0 }, 3*time.Second, 20*time.Millisecond, "fds: before %d now %d", fds0, countFDs())
	_ = g0
	assert.Eventually(t, func() bool { return edgeGoroutines() == "" }, 3*time.Second, 20*time.Millisecond, "goroutines left: %s", edgeGoroutines())
}

// Force shutdown (ShutdownTimeout expires) with one busy request in the
// loop and one streaming from a goroutine.
func TestEventLoopForcedShutdownLeavesNothingRunning(t *testing.T) {
	var started atomic.Int32
	backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		if r.URL.Path == "/stream" {
			for {
				if _, err := w.Write([]byte("tick\n")); err != nil {
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
		<-r.Context().Done()
	})
	e := startLoopEdgeCfg(t, Config{DialTimeout: time.Second, ShutdownTimeout: 300 * time.Millisecond}, route(backend))
	c1, _ := net.Dial("tcp", e.s.HTTPAddr())
	defer c1.Close()
	io.WriteString(c1, "GET /hang HTTP/1.1\r\nHost: app.test\r\n\r\n")
	c2, _ := net.Dial("tcp", e.s.HTTPAddr())
	defer c2.Close()
	io.WriteString(c2, "GET /stream HTTP/1.1\r\nHost: app.test\r\n\r\n")
	require.Eventually(t, func() bool { return started.Load() == 2 }, 2*time.Second, 10*time.Millisecond)
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	br2 := bufio.NewReader(c2)
	for line := ""; !strings.HasPrefix(line, "tick"); {
		var err error
		line, err = br2.ReadString('\n')
		require.NoError(t, err, "the stream reaches the client")
	}
	start := time.Now()
	require.NoError(t, e.stop())
	assert.Less(t, time.Since(start), 2*time.Second)
	gf, cf := inFlight(e.s, backend)
	assert.Equal(t, 0.0, gf)
	assert.Equal(t, int64(0), cf)
	// nothing of the edge left running right after Run returned
	buf := make([]byte, 1<<20)
	st := string(buf[:runtime.Stack(buf, true)])
	assert.NotContains(t, st, "(*evLoop).run", "event loop still running after Run returned")
	// RunConn counts itself done in a deferred call: it may still be
	// returning for a moment.
	assert.Eventually(t, func() bool {
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "runConn")
	}, time.Second, 10*time.Millisecond, "a connection goroutine outlives Run")
}

// Graceful: Run returned -> is the loop thread gone?
func TestEventLoopGoneWhenRunReturns(t *testing.T) {
	backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") })
	e := startLoopEdgeCfg(t, Config{DialTimeout: time.Second, ShutdownTimeout: time.Second}, route(backend))
	c, _ := net.Dial("tcp", e.s.HTTPAddr())
	get(t, c, bufio.NewReader(c), "/")
	c.Close()
	require.NoError(t, e.stop())
	buf := make([]byte, 1<<20)
	st := string(buf[:runtime.Stack(buf, true)])
	assert.NotContains(t, st, "(*evLoop).run", "event loop still running after Run returned")
}

// edgeGoroutines lists goroutine stacks of the edge still running.
func edgeGoroutines() string {
	buf := make([]byte, 4<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "edgeproxy.") && !strings.Contains(g, "Test") && !strings.Contains(g, "ristretto") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
