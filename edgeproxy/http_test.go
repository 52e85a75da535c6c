package edgeproxy_test

import (
	"bufio"
	"encoding/json"
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

// Decision 11 / ARCHITECTURE §5: HTTP routing by Host — exact first, then the
// longest wildcard suffix; port ignored; case-insensitive.
func TestDecision11_HostRoutingExactWildcardPortCase(t *testing.T) {
	e := startEdge(t)
	exact := nameBackend(t, "exact")
	wild := nameBackend(t, "wild")
	deeper := nameBackend(t, "deeper")
	e.publish(t, httpTable(1,
		route("api.example.com", addrOf(exact)),
		route("*.example.com", addrOf(wild)),
		route("*.eu.example.com", addrOf(deeper)),
	))

	cases := []struct{ host, want string }{
		{"api.example.com", "exact"},
		{"API.Example.COM", "exact"},
		{"api.example.com:8080", "exact"},
		{"api.example.com.", "exact"},
		{"www.example.com", "wild"},
		{"a.b.example.com", "wild"},
		{"x.eu.example.com", "deeper"},
		{"X.EU.example.com:443", "deeper"},
	}
	for _, c := range cases {
		code, body := e.get(t, c.host, "/")
		assert.Equal(t, http.StatusOK, code, c.host)
		assert.Equal(t, c.want, body, c.host)
	}
}

// Decision 11: an unknown host (and a wildcard's bare apex) gets 404 with a
// short body naming the host.
func TestDecision11_UnknownHostIs404(t *testing.T) {
	e := startEdge(t)
	wild := nameBackend(t, "wild")
	e.publish(t, httpTable(1, route("*.example.com", addrOf(wild))))

	code, body := e.get(t, "nope.test:81", "/")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "gordon-edge: no route for host nope.test\n", body)

	code, body = e.get(t, "example.com", "/")
	assert.Equal(t, http.StatusNotFound, code, "a wildcard does not cover its apex")
	assert.Contains(t, body, "no route for host example.com")
}

// STYLE "What we take" 13: the backend sees X-Forwarded-For/-Proto/-Host set
// by the edge, the original Host, and a spoofed X-Forwarded-For from the
// client replaced rather than appended to.
func TestDecision11_XForwardedHeadersSetAndSpoofReplaced(t *testing.T) {
	e := startEdge(t)
	type seen struct{ host, xff, xfp, xfh, path string }
	got := make(chan seen, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"), r.URL.RequestURI()}
	}))
	t.Cleanup(be.Close)
	e.publish(t, httpTable(1, route("app.test", addrOf(be))))

	code, _ := e.get(t, "app.test", "/p?q=1", "X-Forwarded-For", "6.6.6.6", "X-Forwarded-Host", "evil.test")
	require.Equal(t, http.StatusOK, code)
	s := <-got
	assert.Equal(t, "app.test", s.host)
	assert.Equal(t, "127.0.0.1", s.xff, "spoofed X-Forwarded-For must be replaced by the peer address")
	assert.Equal(t, "http", s.xfp)
	assert.Equal(t, "app.test", s.xfh)
	assert.Equal(t, "/p?q=1", s.path)
}

// Decision 11: snapshot swaps under concurrent load: 16 clients hammer while
// 50 swaps alternate two backends, then a last swap settles on b; no request
// fails, and once a client saw b after the last swap it never sees a again.
func TestDecision11_SwapUnderLoadNoErrorsNoFlipBack(t *testing.T) {
	e := startEdge(t)
	a := nameBackend(t, "a")
	b := nameBackend(t, "b")
	e.publish(t, httpTable(1, route("app.test", addrOf(a))))

	var stop atomic.Bool
	var failures, requests atomic.Int64
	var flipBack atomic.Int64
	var wg sync.WaitGroup
	final := make(chan struct{})
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sawFinal := false
			for !stop.Load() {
				code, body, err := e.tryGet("app.test", "/")
				requests.Add(1)
				if err != nil || code != http.StatusOK {
					failures.Add(1)
					continue
				}
				select {
				case <-final:
					// After the final swap was confirmed: only b, and never a
					// after b.
					if body == "b" {
						sawFinal = true
					} else if sawFinal {
						flipBack.Add(1)
					}
				default:
				}
			}
		}()
	}
	for gen := uint64(2); gen <= 51; gen++ {
		addr := addrOf(a)
		if gen%2 == 1 {
			addr = addrOf(b)
		}
		require.NoError(t, e.srv.Apply(httpTable(gen, route("app.test", addr))))
		// Pacing, not a wait: it spreads the swaps over the clients'
		// requests.
		time.Sleep(2 * time.Millisecond)
	}
	require.NoError(t, e.srv.Apply(httpTable(52, route("app.test", addrOf(b)))))
	close(final)
	afterFinal := requests.Load()
	require.Eventually(t, func() bool { return requests.Load() >= afterFinal+100 }, 10*time.Second, 5*time.Millisecond,
		"100 requests after the final swap")
	stop.Store(true)
	wg.Wait()

	assert.Greater(t, requests.Load(), int64(100))
	assert.Zero(t, failures.Load())
	assert.Zero(t, flipBack.Load())
	code, body := e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "b", body)
}

// Decision 16: a request in flight during a swap completes on the backend it
// started on, and the backend's in-flight count is visible (> 0) on the admin
// endpoint while it runs, then drops to 0.
func TestDecision16_InFlightRequestFinishesOnOldBackendAndIsCounted(t *testing.T) {
	e := startEdge(t)
	started, release := make(chan struct{}), make(chan struct{})
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release // answers once the swap was checked
		_, _ = io.WriteString(w, "old")
	}))
	t.Cleanup(old.Close)
	newer := nameBackend(t, "new")
	e.publish(t, httpTable(1, route("app.test", addrOf(old))))

	type result struct {
		code int
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		code, body, err := e.tryGet("app.test", "/slow")
		res <- result{code, body, err}
	}()
	<-started

	live := adminStatus(t, e)
	assert.Equal(t, int64(1), inFlight(live, addrOf(old)), "admin /status must count the slow request")

	e.publish(t, httpTable(2, route("app.test", addrOf(newer))))
	code, body := e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "new", body, "new requests go to the new backend")
	st := e.readStatus(t)
	assert.Equal(t, int64(1), inFlight(st, addrOf(old)), "status.json written at the swap carries the old backend's in-flight request")

	close(release)
	r := <-res
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, "old", r.body)
	assert.Equal(t, int64(0), inFlight(adminStatus(t, e), addrOf(old)))
	assert.Equal(t, int64(0), inFlight(e.srv.Status(), addrOf(old)))
}

// Decision 11: a bad routes.json keeps the last good snapshot serving and the
// error (with the rejected generation) is reported in status.json; the next
// good table clears it.
func TestDecision11_BadTableKeepsLastGoodSnapshot(t *testing.T) {
	e := startEdge(t)
	a := nameBackend(t, "a")
	b := nameBackend(t, "b")
	e.publish(t, httpTable(1, route("app.test", addrOf(a))))

	bad := httpTable(2, route("app.test", addrOf(b)), route("APP.test", addrOf(b)))
	e.writeRoutes(t, mustJSON(t, bad))
	st := e.waitStatus(t, func(st routetable.Status) bool { return st.Error != "" })
	assert.Equal(t, uint64(1), st.AppliedGeneration)
	assert.Equal(t, uint64(2), st.RejectedGeneration)
	assert.Contains(t, st.Error, `http host "app.test" routed twice`)
	code, body := e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "a", body)

	e.writeRoutes(t, []byte(`{"schema":1,"generation":3,`))
	st = e.waitStatus(t, func(st routetable.Status) bool { return strings.Contains(st.Error, "decode") })
	assert.Equal(t, uint64(1), st.AppliedGeneration)
	_, body = e.get(t, "app.test", "/")
	assert.Equal(t, "a", body)

	e.publish(t, httpTable(4, route("app.test", addrOf(b))))
	st = e.readStatus(t)
	assert.Empty(t, st.Error)
	assert.Zero(t, st.RejectedGeneration)
	_, body = e.get(t, "app.test", "/")
	assert.Equal(t, "b", body)
}

// Decision 11: backend failures map to short error pages: refused → 503,
// a backend that hangs up mid-request → 502.
func TestDecision11_BackendErrorsMapToStatusCodes(t *testing.T) {
	e := startEdge(t)
	refused := freePort(t)
	hangup, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = hangup.Close() })
	go func() {
		for {
			c, err := hangup.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1024)
			_, _ = c.Read(buf)
			_, _ = c.Write([]byte("garbage\r\n\r\n"))
			_ = c.Close()
		}
	}()
	e.publish(t, httpTable(1, route("down.test", refused), route("bad.test", hangup.Addr().String())))

	code, body := e.get(t, "down.test", "/")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "backend unavailable (app app, service web)")
	assert.NotContains(t, body, refused, "error pages do not show the backend's address")
	code, body = e.get(t, "bad.test", "/")
	assert.Equal(t, http.StatusBadGateway, code)
	assert.Contains(t, body, "bad gateway")
}

// Decision 11: the admin endpoint serves /healthz and the live status with
// the applied generation and the HTTP listener.
func TestDecision11_AdminEndpointAndStatusFile(t *testing.T) {
	e := startEdge(t)
	st := e.readStatus(t)
	assert.Equal(t, e.srv.AdminAddr(), st.AdminAddr)
	assert.NotZero(t, st.PID)
	assert.Zero(t, st.AppliedGeneration, "status.json is written at start even without a table")

	a := nameBackend(t, "a")
	e.publish(t, httpTable(7, route("app.test", addrOf(a))))
	live := adminStatus(t, e)
	assert.Equal(t, uint64(7), live.AppliedGeneration)
	require.NotEmpty(t, live.Listeners)
	assert.Contains(t, live.Listeners, routetable.ListenerStatus{Addr: e.srv.HTTPAddr(), Proto: "http"})
	assert.Contains(t, live.Backends, routetable.BackendStatus{Addr: addrOf(a)})

	resp, err := http.Get("http://" + e.srv.AdminAddr() + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func adminStatus(t *testing.T, e *edge) routetable.Status {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/status", e.srv.AdminAddr()))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var st routetable.Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

func inFlight(st routetable.Status, addr string) int64 {
	for _, b := range st.Backends {
		if b.Addr == addr {
			return b.InFlight
		}
	}
	return -1
}

// Decision 16: an upgraded connection (WebSocket-style) is relayed both ways
// and counted as an open connection, not as an in-flight request, so a drain
// never waits for it.
func TestDecision16_UpgradedConnectionNotCountedInFlight(t *testing.T) {
	e := startEdge(t)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
		line, err := brw.ReadString('\n')
		if err != nil {
			return
		}
		_, _ = brw.WriteString("echo:" + line)
		_ = brw.Flush()
		_, _ = brw.ReadString('\n') // hold the tunnel open until the client closes
	}))
	t.Cleanup(be.Close)
	e.publish(t, httpTable(1, route("ws.test", addrOf(be))))

	c, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(3*time.Second)))
	_, err = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: ws.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	require.NoError(t, err)
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	_, err = io.WriteString(c, "hi\n")
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "echo:hi\n", line)

	st := e.srv.Status()
	assert.Equal(t, int64(0), inFlight(st, addrOf(be)))
	assert.Equal(t, int64(1), openConns(st, addrOf(be)))
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return openConns(e.srv.Status(), addrOf(be)) == 0 }, 3*time.Second, 10*time.Millisecond)
}

// Decision 11: the last good table survives a restart: an edge that starts
// while routes.json is bad serves the table it last applied and reports the
// error.
func TestDecision11_RestartWithBadTableServesLastGood(t *testing.T) {
	first := startEdge(t)
	a := nameBackend(t, "a")
	first.publish(t, httpTable(1, route("app.test", addrOf(a))))
	first.stop()

	first.writeRoutes(t, []byte(`{"schema":1,"generation":2,"http":[{"host":"bad host"}]}`))
	second := startEdge(t, func(c *edgeproxy.Config) { c.StateDir = first.stateDir })
	st := second.readStatus(t)
	assert.Equal(t, uint64(1), st.AppliedGeneration)
	assert.Equal(t, uint64(2), st.RejectedGeneration)
	assert.Contains(t, st.Error, "bad host")
	code, body := second.get(t, "app.test", "/")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "a", body)
}
