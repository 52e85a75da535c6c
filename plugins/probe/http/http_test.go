package httpprobe_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	httpprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/http"
)

// backend is an httptest server that records the requests it saw.
type backend struct {
	*httptest.Server
	mu   sync.Mutex
	seen []*http.Request
	hits map[string]int
}

func newBackend(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *backend {
	t.Helper()
	b := &backend{hits: map[string]int{}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.seen = append(b.seen, r.Clone(context.Background()))
		b.hits[r.URL.Path]++
		b.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) addr() string { return strings.TrimPrefix(b.URL, "http://") }

func (b *backend) requests() []*http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*http.Request(nil), b.seen...)
}

func probeReq(addr, path, host string) core.ProbeRequest {
	return core.ProbeRequest{
		Target:         core.ProbeTarget{App: "blog", Service: "web", ContainerID: "c-new", Address: addr, Port: 8080, Host: host},
		Readiness:      core.Readiness{Type: core.ReadinessHTTP, Path: path, Port: 8080},
		AttemptTimeout: 2 * time.Second,
	}
}

func TestR31_ReadyOn2xxNotOn5xx(t *testing.T) {
	status := http.StatusServiceUnavailable
	var mu sync.Mutex
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(status)
	})
	p := httpprobe.New()
	res, err := p.Check(context.Background(), probeReq(b.addr(), "/healthz", ""))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Equal(t, "GET http://"+b.addr()+"/healthz: 503 Service Unavailable", res.Detail)

	mu.Lock()
	status = http.StatusNoContent
	mu.Unlock()
	res, err = p.Check(context.Background(), probeReq(b.addr(), "/healthz", ""))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)
	assert.Equal(t, 2, b.hits["/healthz"])
}

func TestR31_NoRedirectFollowedAnd3xxReady(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			http.Redirect(w, r, "/login", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	})
	res, err := httpprobe.New().Check(context.Background(), probeReq(b.addr(), "", ""))
	require.NoError(t, err)
	assert.True(t, res.Ready, "200–399 is ready")
	assert.Contains(t, res.Detail, "302 Found")
	assert.Equal(t, 1, b.hits["/"])
	assert.Equal(t, 0, b.hits["/login"], "redirect not followed")
}

func TestR31_ClientErrorsNotReady(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	res, err := httpprobe.New().Check(context.Background(), probeReq(b.addr(), "/missing", ""))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "404 Not Found")
}

func TestDecision9_HostHeaderSent(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "blog.example.com" {
			w.WriteHeader(http.StatusMisdirectedRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	res, err := httpprobe.New().Check(context.Background(), probeReq(b.addr(), "/healthz?full=1", "blog.example.com"))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)
	seen := b.requests()
	require.Len(t, seen, 1)
	assert.Equal(t, "blog.example.com", seen[0].Host)
	assert.Equal(t, "/healthz", seen[0].URL.Path)
	assert.Equal(t, "full=1", seen[0].URL.RawQuery)
	assert.Equal(t, http.MethodGet, seen[0].Method)
	assert.True(t, seen[0].Close, "keep-alives disabled")
}

func TestR31_ProxyEnvironmentIgnored(t *testing.T) {
	// A bogus proxy that would fail every request if it were used.
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("http_proxy", "http://127.0.0.1:1")
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	res, err := httpprobe.New().Check(context.Background(), probeReq(b.addr(), "/", "blog.example.com"))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)
	assert.Len(t, b.requests(), 1, "the backend itself was reached")
}

func TestR31_AttemptBoundedByAttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	req := probeReq(b.addr(), "/slow", "")
	req.AttemptTimeout = 150 * time.Millisecond
	start := time.Now()
	res, err := httpprobe.New().Check(context.Background(), req)
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "GET http://"+b.addr()+"/slow: no response within 150ms")
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestR31_DialErrorNotReady(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	res, err := httpprobe.New().Check(context.Background(), probeReq(addr, "/healthz", ""))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "GET http://"+addr+"/healthz: dial tcp")
	assert.Contains(t, res.Detail, "refused")
}

func TestR31_CallerContextReturned(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := httpprobe.New().Check(ctx, probeReq(b.addr(), "/", ""))
	require.ErrorIs(t, err, context.Canceled)
}

func TestR31_EmptyAddressIsInvalid(t *testing.T) {
	_, err := httpprobe.New().Check(context.Background(), probeReq("", "/", ""))
	require.ErrorIs(t, err, core.ErrInvalid)
}

func TestR31_TimeoutErrorNamesURLAndLastAttempt(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	w := &engine.ReadinessWaiter{Probes: probeSet{httpprobe.New()}, HTTPInterval: 100 * time.Millisecond}
	r := core.Readiness{Type: core.ReadinessHTTP, Path: "/healthz", Port: 8080, Timeout: core.Duration(450 * time.Millisecond)}
	var progress []engine.WaitResult
	start := time.Now()
	res, err := w.Wait(context.Background(), probeReq(b.addr(), "/healthz", "").Target, r, func(wr engine.WaitResult) { progress = append(progress, wr) })
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.Less(t, time.Since(start), 2*time.Second)
	url := "http://" + b.addr() + "/healthz"
	assert.True(t, strings.HasPrefix(err.Error(), "HTTP readiness timeout after 450ms: GET "+url+": "), err.Error())
	assert.Contains(t, err.Error(), res.LastDetail, "names the last attempt")
	require.NotEmpty(t, progress)
	assert.Equal(t, "GET "+url+": 502 Bad Gateway", progress[0].LastDetail)
	assert.GreaterOrEqual(t, res.Attempts, 3)
	assert.Len(t, progress, res.Attempts, "progress after every failed attempt")
	assert.Equal(t, res.Attempts, b.hits["/healthz"])
}

func TestR31_WaiterReadyWhenBackendRecovers(t *testing.T) {
	var mu sync.Mutex
	n := 0
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		if k < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	w := &engine.ReadinessWaiter{Probes: probeSet{httpprobe.New()}, HTTPInterval: 20 * time.Millisecond}
	res, err := w.Wait(context.Background(), probeReq(b.addr(), "/", "").Target, core.Readiness{Type: core.ReadinessHTTP, Timeout: core.Duration(5 * time.Second)}, nil)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Attempts)
	assert.Contains(t, res.LastDetail, "200 OK")
}

func TestR31_DescribeAndValidate(t *testing.T) {
	p := httpprobe.New()
	info, err := p.Describe(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "http", info.Name)
	assert.Equal(t, 1, info.Protocol)
	msgs, err := p.ValidateConfig(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, msgs)
	msgs, err = p.ValidateConfig(context.Background(), json.RawMessage(`{"path":"/x"}`))
	require.NoError(t, err)
	assert.Len(t, msgs, 1)
}

func TestR31_URL(t *testing.T) {
	assert.Equal(t, "http://127.0.0.1:18080/", httpprobe.URL("127.0.0.1:18080", ""))
	assert.Equal(t, "http://127.0.0.1:18080/healthz", httpprobe.URL("127.0.0.1:18080", "healthz"))
	assert.Equal(t, "http://127.0.0.1:18080/a?b=c", httpprobe.URL("127.0.0.1:18080", "/a?b=c"))
}

type probeSet struct{ p core.Prober }

func (s probeSet) Prober(context.Context, string, string) (core.Prober, error) { return s.p, nil }
