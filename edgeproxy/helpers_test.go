package edgeproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/renameio/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// edge is a running in-process gordon-edge for one test.
type edge struct {
	srv      *edgeproxy.Server
	stateDir string
	client   *http.Client
	// stop ends Run and waits for it (also done at test cleanup).
	stop func()
}

// startEdge runs an edge on loopback with a fast poll interval; it stops
// when the test ends.
func startEdge(t *testing.T, tune ...func(*edgeproxy.Config)) *edge {
	t.Helper()
	dir := t.TempDir()
	cfg := edgeproxy.Config{
		StateDir:        dir,
		HTTPAddr:        "127.0.0.1:0",
		PollInterval:    20 * time.Millisecond,
		DialTimeout:     time.Second,
		ShutdownTimeout: 2 * time.Second,
	}
	for _, f := range tune {
		f(&cfg)
	}
	srv := edgeproxy.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Error("edge did not stop within 5s")
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("edge exited before ready: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("edge not ready within 5s")
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &edge{srv: srv, stateDir: cfg.StateDir, stop: stop, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// publish writes table as routes.json atomically and waits until the edge
// reports its generation applied.
func (e *edge) publish(t *testing.T, table routetable.Table) {
	t.Helper()
	e.writeRoutes(t, mustJSON(t, table))
	e.waitStatus(t, func(st routetable.Status) bool { return st.AppliedGeneration >= table.Generation })
}

func (e *edge) writeRoutes(t *testing.T, data []byte) {
	t.Helper()
	require.NoError(t, renameio.WriteFile(filepath.Join(e.stateDir, "edge", edgeproxy.RoutesFile), data, 0o644))
}

// readStatus reads status.json.
func (e *edge) readStatus(t *testing.T) routetable.Status {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.stateDir, "edge", edgeproxy.StatusFile))
	require.NoError(t, err)
	var st routetable.Status
	require.NoError(t, json.Unmarshal(data, &st))
	return st
}

// waitStatus polls status.json until ok holds (3 s).
func (e *edge) waitStatus(t *testing.T, ok func(routetable.Status) bool) routetable.Status {
	t.Helper()
	return e.waitStatusFor(t, 3*time.Second, ok)
}

// waitStatusFor polls status.json until ok holds or d passes.
func (e *edge) waitStatusFor(t *testing.T, d time.Duration, ok func(routetable.Status) bool) routetable.Status {
	t.Helper()
	var got routetable.Status
	matched := assert.Eventually(t, func() bool {
		data, err := os.ReadFile(filepath.Join(e.stateDir, "edge", edgeproxy.StatusFile))
		var st routetable.Status
		if err != nil || json.Unmarshal(data, &st) != nil || !ok(st) {
			return false
		}
		got = st
		return true
	}, d, 10*time.Millisecond)
	if !matched {
		t.Fatalf("status.json never matched; last: %+v", e.readStatus(t))
	}
	return got
}

// awaitSignal waits (10 s at most) for a value on ch: an event the test
// code under observation reports, such as a request reaching a backend.
func awaitSignal[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting: %s", what)
		var zero T
		return zero
	}
}

// get sends GET path with Host host through the edge.
func (e *edge) get(t *testing.T, host, path string, hdr ...string) (int, string) {
	t.Helper()
	code, body, err := e.tryGet(host, path, hdr...)
	require.NoError(t, err)
	return code, body
}

func (e *edge) tryGet(host, path string, hdr ...string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+e.srv.HTTPAddr()+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// nameBackend is an HTTP backend answering its name.
func nameBackend(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(s.Close)
	return s
}

func addrOf(s *httptest.Server) string { return s.Listener.Addr().String() }

func httpTable(gen uint64, routes ...routetable.HTTPRoute) routetable.Table {
	return routetable.Table{Schema: routetable.Schema, Generation: gen, Graph: routetable.Graph{HTTP: routes}}
}

func route(host string, addrs ...string) routetable.HTTPRoute {
	r := routetable.HTTPRoute{Host: host, App: "app", Service: "web"}
	for _, a := range addrs {
		r.Backends = append(r.Backends, routetable.Backend{Addr: a, Container: "c-" + a})
	}
	return r
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// freePort returns a loopback "127.0.0.1:port" that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// echoTCP is a TCP backend that prefixes every line it echoes with name.
func echoTCP(t *testing.T, name string) string {
	t.Helper()
	return serveConns(t, func(c net.Conn, _ *bufio.Reader) {
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if _, werr := c.Write(append([]byte(name+":"), buf[:n]...)); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}
