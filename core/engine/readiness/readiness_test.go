package readiness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
)

func pubHTTP(port int, host string) core.HTTPInterface {
	return core.HTTPInterface{Port: port, Host: host, Visibility: core.VisibilityPublic}
}

func intHTTP(port int) core.HTTPInterface {
	return core.HTTPInterface{Port: port, Visibility: core.VisibilityInternal}
}

func TestS33_ProbeSelection(t *testing.T) {
	vol := []core.VolumeMount{{Name: "data", Path: "/data"}}
	bind := []core.BindMount{{Name: "cfg", Path: "/etc/app"}}
	tcp9000 := []core.L4Interface{{Port: 9000, Publish: "0.0.0.0:9000"}}
	cases := []struct {
		name     string
		spec     core.ServiceSpec
		wantType string
		wantPort int
		wantPath string
		declared string // DeclaredReadiness type
	}{
		{"a published TCP-only is not implicit HTTP", core.ServiceSpec{TCP: tcp9000}, core.ReadinessTCP, 9000, "", core.ReadinessNone},
		{"b single TCP readiness none is unchecked (explicit none, R29)", core.ServiceSpec{TCP: tcp9000, Readiness: core.Readiness{Type: core.ReadinessNone}}, core.ReadinessNone, 0, "", core.ReadinessNone},
		{"c sequential TCP with volume is implicit TCP (postgres)", core.ServiceSpec{TCP: tcp9000, Volumes: vol}, core.ReadinessTCP, 9000, "", core.ReadinessNone},
		{"c sequential TCP with bind is implicit TCP", core.ServiceSpec{TCP: tcp9000, Binds: bind}, core.ReadinessTCP, 9000, "", core.ReadinessNone},
		{"c two TCP ports: default TCP connect on the first", core.ServiceSpec{TCP: []core.L4Interface{{Port: 9000}, {Port: 9001}}}, core.ReadinessTCP, 9000, "", core.ReadinessNone},
		{"c TCP and UDP is implicit TCP on the TCP port", core.ServiceSpec{TCP: tcp9000, UDP: []core.L4Interface{{Port: 28015}}}, core.ReadinessTCP, 9000, "", core.ReadinessNone},
		{"healthcheck in the manifest is implicit docker (before HTTP)", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, Healthcheck: &core.Healthcheck{Test: []string{"CMD", "/check"}}}, core.ReadinessDocker, 0, "", core.ReadinessNone},
		{"healthcheck is implicit docker before TCP", core.ServiceSpec{TCP: tcp9000, Volumes: vol, Healthcheck: &core.Healthcheck{Test: []string{"CMD-SHELL", "pg_isready"}}}, core.ReadinessDocker, 0, "", core.ReadinessNone},
		{"disabled healthcheck is not docker", core.ServiceSpec{TCP: tcp9000, Healthcheck: &core.Healthcheck{Disable: true}}, core.ReadinessTCP, 9000, "", core.ReadinessNone},
		{"declared docker kept", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, Readiness: core.Readiness{Type: core.ReadinessDocker}}, core.ReadinessDocker, 0, "", core.ReadinessDocker},
		{"c TCP and internal HTTP: default TCP connect on the TCP port", core.ServiceSpec{TCP: tcp9000, HTTP: []core.HTTPInterface{intHTTP(8080)}}, core.ReadinessTCP, 9000, "", core.ReadinessNone},
		{"c declared log kept", core.ServiceSpec{TCP: tcp9000, Readiness: core.Readiness{Type: core.ReadinessLog, Pattern: "ready"}}, core.ReadinessLog, 0, "", core.ReadinessLog},
		{"d declared tcp not replaced by implicit HTTP", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, Readiness: core.Readiness{Type: core.ReadinessTCP, Port: 8080}}, core.ReadinessTCP, 8080, "", core.ReadinessTCP},
		{"d declared log not replaced by implicit HTTP", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, Readiness: core.Readiness{Type: core.ReadinessLog, Pattern: "up"}}, core.ReadinessLog, 0, "", core.ReadinessLog},
		{"d declared http path kept", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, Readiness: core.Readiness{Type: core.ReadinessHTTP, Path: "/healthz"}}, core.ReadinessHTTP, 8080, "/healthz", core.ReadinessHTTP},
		{"d declared plugin kept", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, Readiness: core.Readiness{Type: core.ReadinessPlugin, Plugin: "pg"}}, core.ReadinessPlugin, 8080, "", core.ReadinessPlugin},
		{"e explicit none on TCP with volume stays unchecked", core.ServiceSpec{TCP: tcp9000, Volumes: vol, Readiness: core.Readiness{Type: core.ReadinessNone}}, core.ReadinessNone, 0, "", core.ReadinessNone},
		{"implicit HTTP on the public port", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}}, core.ReadinessHTTP, 8080, "/", core.ReadinessNone},
		{"implicit HTTP on the first of several public ports", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8081, "a.example"), pubHTTP(8080, "b.example")}}, core.ReadinessHTTP, 8081, "/", core.ReadinessNone},
		{"implicit HTTP ignores devices (decision 10)", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, Devices: []string{"/dev/fuse"}}, core.ReadinessHTTP, 8080, "/", core.ReadinessNone},
		{"no implicit HTTP with an internal interface: TCP connect on the public port", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example"), intHTTP(9090)}}, core.ReadinessTCP, 8080, "", core.ReadinessNone},
		{"no implicit HTTP with a volume: TCP connect on the public port", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, Volumes: vol}, core.ReadinessTCP, 8080, "", core.ReadinessNone},
		{"no implicit HTTP with a TCP interface: TCP connect on the public HTTP port", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, TCP: tcp9000}, core.ReadinessTCP, 8080, "", core.ReadinessNone},
		{"declared http with public HTTP and TCP has no single port", core.ServiceSpec{HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, TCP: tcp9000, Readiness: core.Readiness{Type: core.ReadinessHTTP}}, core.ReadinessHTTP, 0, "/", core.ReadinessHTTP},
		{"declared tcp on internal-only HTTP port resolves the single port", core.ServiceSpec{HTTP: []core.HTTPInterface{intHTTP(5432)}, Readiness: core.Readiness{Type: core.ReadinessTCP}}, core.ReadinessTCP, 5432, "", core.ReadinessTCP},
		{"internal HTTP only: TCP connect on it (from the app network)", core.ServiceSpec{HTTP: []core.HTTPInterface{intHTTP(5432)}, Volumes: vol}, core.ReadinessTCP, 5432, "", core.ReadinessNone},
		{"UDP only: nothing to connect to", core.ServiceSpec{UDP: []core.L4Interface{{Port: 53}}}, core.ReadinessNone, 0, "", core.ReadinessNone},
		{"nothing to probe", core.ServiceSpec{}, core.ReadinessNone, 0, "", core.ReadinessNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec
			s.Name = "web"
			before := s.Readiness
			got := readiness.DeployReadiness(&s)
			assert.Equal(t, tc.wantType, got.Type)
			assert.Equal(t, tc.wantPort, got.Port)
			assert.Equal(t, tc.wantPath, got.Path)
			assert.Equal(t, core.Duration(30*time.Second), got.Timeout, "R35 default budget")
			assert.Equal(t, before, s.Readiness, "the spec is not modified")
			decl := readiness.DeclaredReadiness(&s)
			assert.Equal(t, tc.declared, decl.Type, "R29: verification uses the declared check only")
			assert.Equal(t, core.Duration(30*time.Second), decl.Timeout)
		})
	}
}

func TestS33_SingleWriterIffVolumesOrBinds(t *testing.T) {
	assert.True(t, (&core.ServiceSpec{Volumes: []core.VolumeMount{{Name: "d", Path: "/d"}}}).SingleWriter())
	assert.True(t, (&core.ServiceSpec{Binds: []core.BindMount{{Name: "c", Path: "/c"}}}).SingleWriter())
	assert.False(t, (&core.ServiceSpec{TCP: []core.L4Interface{{Port: 9000}}, Devices: []string{"/dev/x"}}).SingleWriter())
}

func TestR35_DeclaredTimeoutKept(t *testing.T) {
	s := core.ServiceSpec{Name: "web", HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, Readiness: core.Readiness{Timeout: core.Duration(90 * time.Second)}}
	r := readiness.DeployReadiness(&s)
	assert.Equal(t, core.ReadinessHTTP, r.Type)
	assert.Equal(t, 90*time.Second, r.Timeout.D())
}

func TestR30_ProbeTargetFor(t *testing.T) {
	start := time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)
	binds := []core.BackendBind{
		{ContainerPort: 28015, HostPort: 40001, Protocol: "udp"},
		{ContainerPort: 8080, HostPort: 18080, Protocol: "tcp"},
		{ContainerPort: 9000, HostPort: 18081, Protocol: "tcp"},
	}
	t.Run("http address and first public host", func(t *testing.T) {
		s := core.ServiceSpec{Name: "web", HTTP: []core.HTTPInterface{pubHTTP(8080, "blog.example.com"), pubHTTP(8080, "www.example.com")}}
		r := readiness.DeployReadiness(&s)
		tg, err := readiness.ProbeTargetFor("blog", &s, r, "c-new", start, binds)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1:18080", tg.Address)
		assert.Equal(t, "blog.example.com", tg.Host)
		assert.Equal(t, 8080, tg.Port)
		assert.Equal(t, "blog", tg.App)
		assert.Equal(t, "web", tg.Service)
		assert.Equal(t, "c-new", tg.ContainerID)
		assert.Equal(t, start, tg.StartedAt)
		assert.Equal(t, s.HTTP, tg.HTTP)
	})
	t.Run("readiness.host overrides (decision 9)", func(t *testing.T) {
		s := core.ServiceSpec{Name: "web", HTTP: []core.HTTPInterface{pubHTTP(8080, "blog.example.com")}, Readiness: core.Readiness{Type: core.ReadinessHTTP, Host: "health.internal"}}
		tg, err := readiness.ProbeTargetFor("blog", &s, readiness.DeployReadiness(&s), "c-new", start, binds)
		require.NoError(t, err)
		assert.Equal(t, "health.internal", tg.Host)
	})
	t.Run("tcp readiness of an undeclared port is internal (R30)", func(t *testing.T) {
		s := core.ServiceSpec{Name: "cache", Readiness: core.Readiness{Type: core.ReadinessTCP, Port: 6379}}
		tg, err := readiness.ProbeTargetFor("blog", &s, readiness.DeployReadiness(&s), "c-new", start, binds)
		require.NoError(t, err)
		assert.True(t, tg.Internal, "probed from the helper on the app network")
		assert.Empty(t, tg.Address)
		assert.Equal(t, 6379, tg.Port)
	})
	t.Run("wildcard host becomes a matching name", func(t *testing.T) {
		s := core.ServiceSpec{Name: "web", HTTP: []core.HTTPInterface{pubHTTP(8080, "*.example.com")}}
		tg, err := readiness.ProbeTargetFor("blog", &s, readiness.DeployReadiness(&s), "c-new", start, binds)
		require.NoError(t, err)
		assert.Equal(t, "readiness.example.com", tg.Host)
	})
	t.Run("no public host falls back to the dialled address", func(t *testing.T) {
		s := core.ServiceSpec{Name: "api", TCP: []core.L4Interface{{Port: 8080}}, Readiness: core.Readiness{Type: core.ReadinessHTTP, Path: "/healthz"}}
		tg, err := readiness.ProbeTargetFor("blog", &s, readiness.DeployReadiness(&s), "c-new", start, binds)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1:18080", tg.Host)
	})
	t.Run("tcp never dials a udp bind", func(t *testing.T) {
		s := core.ServiceSpec{Name: "game", TCP: []core.L4Interface{{Port: 28015}}}
		_, err := readiness.ProbeTargetFor("blog", &s, readiness.DeployReadiness(&s), "c-new", start, binds)
		require.ErrorIs(t, err, core.ErrInvalid)
		assert.Contains(t, err.Error(), "28015")
		assert.Contains(t, err.Error(), "game")
	})
	t.Run("missing bind is ErrInvalid", func(t *testing.T) {
		s := core.ServiceSpec{Name: "db", TCP: []core.L4Interface{{Port: 5432}}}
		_, err := readiness.ProbeTargetFor("blog", &s, readiness.DeployReadiness(&s), "c-new", start, binds)
		require.ErrorIs(t, err, core.ErrInvalid)
		assert.Contains(t, err.Error(), "has no backend address")
	})
	t.Run("http without a port is ErrInvalid", func(t *testing.T) {
		s := core.ServiceSpec{Name: "web", HTTP: []core.HTTPInterface{pubHTTP(8080, "a.example")}, TCP: []core.L4Interface{{Port: 9000}}, Readiness: core.Readiness{Type: core.ReadinessHTTP}}
		_, err := readiness.ProbeTargetFor("blog", &s, readiness.DeployReadiness(&s), "c-new", start, binds)
		require.ErrorIs(t, err, core.ErrInvalid)
	})
	t.Run("log needs no bind", func(t *testing.T) {
		s := core.ServiceSpec{Name: "worker", Readiness: core.Readiness{Type: core.ReadinessLog, Pattern: "up"}}
		tg, err := readiness.ProbeTargetFor("blog", &s, readiness.DeployReadiness(&s), "c-new", start, nil)
		require.NoError(t, err)
		assert.Empty(t, tg.Address)
		assert.Equal(t, start, tg.StartedAt)
	})
}

// fakeProber is a programmable core.Prober: CheckFn runs each attempt.
type fakeProber struct {
	mu      sync.Mutex
	reqs    []core.ProbeRequest
	CheckFn func(ctx context.Context, n int, req core.ProbeRequest) (core.ProbeResult, error)
}

func (f *fakeProber) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "fake", Protocol: 1}, nil
}

func (f *fakeProber) ValidateConfig(context.Context, json.RawMessage) ([]string, error) {
	return nil, nil
}

func (f *fakeProber) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	n := len(f.reqs)
	f.mu.Unlock()
	return f.CheckFn(ctx, n, req)
}

func (f *fakeProber) requests() []core.ProbeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]core.ProbeRequest(nil), f.reqs...)
}

// fakeProbeSet serves one prober and records the lookups.
type fakeProbeSet struct {
	mu      sync.Mutex
	p       core.Prober
	lookups []string
}

func (s *fakeProbeSet) Prober(_ context.Context, kind, plugin string) (core.Prober, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups = append(s.lookups, kind+"/"+plugin)
	if s.p == nil {
		return nil, fmt.Errorf("%w: probe %s", core.ErrNotFound, kind)
	}
	return s.p, nil
}

var tcpTarget = core.ProbeTarget{App: "blog", Service: "db", ContainerID: "c-new", Address: "127.0.0.1:18081", Port: 9000}

func TestS41_SuccessAfterBudgetRejected(t *testing.T) {
	fp := &fakeProber{CheckFn: func(ctx context.Context, _ int, _ core.ProbeRequest) (core.ProbeResult, error) {
		select {
		case <-time.After(400 * time.Millisecond):
		case <-ctx.Done():
		}
		return core.ProbeResult{Ready: true, Detail: "connected"}, nil
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}}
	start := time.Now()
	res, err := w.Wait(context.Background(), tcpTarget, core.Readiness{Type: core.ReadinessTCP, Port: 9000, Timeout: core.Duration(200 * time.Millisecond)}, nil)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, err.Error(), "TCP readiness timeout")
	assert.Regexp(t, `^TCP readiness timeout after 200ms on 127\.0\.0\.1:18081`, err.Error())
	assert.ErrorIs(t, err, core.ErrUnavailable)
	var te *readiness.ReadinessTimeoutError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 1, te.Attempts)
	assert.Equal(t, 1, res.Attempts)
}

func TestS42_CallerCancelReturned(t *testing.T) {
	fp := &fakeProber{CheckFn: func(context.Context, int, core.ProbeRequest) (core.ProbeResult, error) {
		return core.ProbeResult{Detail: "127.0.0.1:18081: " + core.ProbeDetailClosedAfterAccept}, nil
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}, TCPInterval: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var progressed []readiness.WaitResult
	var mu sync.Mutex
	start := time.Now()
	res, err := w.Wait(ctx, tcpTarget, core.Readiness{Type: core.ReadinessTCP, Port: 9000, Timeout: core.Duration(10 * time.Second)}, func(r readiness.WaitResult) {
		mu.Lock()
		progressed = append(progressed, r)
		mu.Unlock()
		if r.Attempts >= 2 {
			cancel() // the caller gives up while the wait goes on
		}
	})
	require.Error(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, context.Canceled, err, "the caller's own error, as is")
	assert.NotContains(t, err.Error(), "TCP readiness timeout")
	assert.GreaterOrEqual(t, res.Attempts, 2)
	assert.True(t, core.IsClosedAfterAccept(res.LastDetail))
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, progressed)
	assert.Equal(t, 1, progressed[0].Attempts)
}

func TestR33_CallerDeadlineBeforeBudgetIsCallersError(t *testing.T) {
	fp := &fakeProber{CheckFn: func(context.Context, int, core.ProbeRequest) (core.ProbeResult, error) {
		return core.ProbeResult{Detail: "connect: refused"}, nil
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}, TCPInterval: 10 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := w.Wait(ctx, tcpTarget, core.Readiness{Type: core.ReadinessTCP, Port: 9000, Timeout: core.Duration(5 * time.Second)}, nil)
	assert.Equal(t, context.DeadlineExceeded, err)
}

// R33 with the attempt ramp: the pauses start at 50 ms and double up to
// the 500 ms interval (50 + 100 ms before the third attempt here).
func TestR33_TCPRetriesEvery500msUntilReady(t *testing.T) {
	fp := &fakeProber{CheckFn: func(_ context.Context, n int, _ core.ProbeRequest) (core.ProbeResult, error) {
		if n < 3 {
			return core.ProbeResult{Detail: "connect 127.0.0.1:18081: connection refused"}, nil
		}
		return core.ProbeResult{Ready: true, Detail: "connected"}, nil
	}}
	ps := &fakeProbeSet{p: fp}
	w := &readiness.ReadinessWaiter{Probes: ps}
	var calls int
	start := time.Now()
	res, err := w.Wait(context.Background(), tcpTarget, core.Readiness{Type: core.ReadinessTCP, Port: 9000, Timeout: core.Duration(5 * time.Second)}, func(r readiness.WaitResult) {
		calls++
		assert.Contains(t, r.LastDetail, "connection refused")
	})
	require.NoError(t, err)
	elapsed := time.Since(start)
	assert.GreaterOrEqual(t, elapsed, 150*time.Millisecond, "pauses of 50 and 100 ms")
	assert.Less(t, elapsed, 1*time.Second, "not two whole 500 ms intervals")
	assert.Equal(t, 3, res.Attempts)
	assert.Equal(t, "connected", res.LastDetail)
	assert.Equal(t, 2, calls, "progress after every failed attempt")
	assert.Equal(t, []string{"tcp/"}, ps.lookups, "prober resolved once")
	for _, req := range fp.requests() {
		assert.Equal(t, tcpTarget, req.Target)
		assert.LessOrEqual(t, req.AttemptTimeout, 5*time.Second)
	}
}

func TestR29_NoneIsReadyAtOnce(t *testing.T) {
	ps := &fakeProbeSet{}
	w := &readiness.ReadinessWaiter{Probes: ps}
	for _, typ := range []string{"", core.ReadinessNone} {
		res, err := w.Wait(context.Background(), tcpTarget, core.Readiness{Type: typ}, nil)
		require.NoError(t, err)
		assert.Equal(t, 0, res.Attempts)
	}
	assert.Empty(t, ps.lookups)
}

// R31 with the attempt ramp: attempts at 0, 0.05, 0.15, 0.35 and 0.75 s
// (pauses 50, 100, 200, 400 ms), then every second; a 1.5 s budget ends
// before the sixth (due at 1.55 s).
func TestR31_HTTPAttemptBoundedAndRetriedEverySecond(t *testing.T) {
	fp := &fakeProber{CheckFn: func(_ context.Context, n int, req core.ProbeRequest) (core.ProbeResult, error) {
		return core.ProbeResult{Detail: "GET http://127.0.0.1:18080/healthz: 503 Service Unavailable"}, nil
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}}
	target := core.ProbeTarget{App: "blog", Service: "web", ContainerID: "c-new", Address: "127.0.0.1:18080", Port: 8080}
	start := time.Now()
	res, err := w.Wait(context.Background(), target, core.Readiness{Type: core.ReadinessHTTP, Path: "/healthz", Port: 8080, Timeout: core.Duration(1500 * time.Millisecond)}, nil)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, 5, res.Attempts, "attempts at 0, 0.05, 0.15, 0.35, 0.75 s within a 1.5 s budget")
	assert.Equal(t, "HTTP readiness timeout after 1.5s: GET http://127.0.0.1:18080/healthz: 503 Service Unavailable (app blog, service web, container c-new, 5 attempts)", err.Error())
	reqs := fp.requests()
	require.Len(t, reqs, 5)
	assert.Equal(t, 1500*time.Millisecond, reqs[0].AttemptTimeout.Round(100*time.Millisecond), "min(2 s, remaining)")
	assert.LessOrEqual(t, reqs[4].AttemptTimeout, 800*time.Millisecond)
	assert.Greater(t, reqs[4].AttemptTimeout, time.Duration(0))
}

func TestR31_HTTPAttemptCapTwoSeconds(t *testing.T) {
	fp := &fakeProber{CheckFn: func(_ context.Context, n int, req core.ProbeRequest) (core.ProbeResult, error) {
		return core.ProbeResult{Ready: true}, nil
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}}
	_, err := w.Wait(context.Background(), core.ProbeTarget{Address: "127.0.0.1:1"}, core.Readiness{Type: core.ReadinessHTTP, Timeout: core.Duration(30 * time.Second)}, nil)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, fp.requests()[0].AttemptTimeout)
}

func TestR31_HTTPAttemptOverrunIsNotReadyAndRetried(t *testing.T) {
	fp := &fakeProber{CheckFn: func(ctx context.Context, n int, req core.ProbeRequest) (core.ProbeResult, error) {
		if n == 1 {
			<-ctx.Done() // a backend that hangs past its attempt bound
			return core.ProbeResult{}, ctx.Err()
		}
		return core.ProbeResult{Ready: true, Detail: "GET http://x/: 200 OK"}, nil
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}, HTTPInterval: 10 * time.Millisecond}
	start := time.Now()
	res, err := w.Wait(context.Background(), core.ProbeTarget{Address: "127.0.0.1:1"}, core.Readiness{Type: core.ReadinessHTTP, Timeout: core.Duration(10 * time.Second)}, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Attempts)
	assert.Less(t, time.Since(start), 3*time.Second, "first attempt cut at 2 s")
}

func TestR32_BackendErrorEndsWaitAtOnce(t *testing.T) {
	fp := &fakeProber{CheckFn: func(context.Context, int, core.ProbeRequest) (core.ProbeResult, error) {
		return core.ProbeResult{}, fmt.Errorf("%w: probe tcp", core.ErrPluginExited)
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}}
	res, err := w.Wait(context.Background(), tcpTarget, core.Readiness{Type: core.ReadinessTCP, Timeout: core.Duration(5 * time.Second)}, nil)
	require.ErrorIs(t, err, core.ErrPluginExited)
	assert.Contains(t, err.Error(), "app blog service db container c-new")
	assert.Equal(t, 1, res.Attempts)
}

func TestR29_UnknownProbeIsNotFound(t *testing.T) {
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{}}
	_, err := w.Wait(context.Background(), tcpTarget, core.Readiness{Type: core.ReadinessPlugin, Plugin: "pg"}, nil)
	require.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "db")
}

func TestR34_LogWaiterFailsClosedWithoutStartTime(t *testing.T) {
	fp := &fakeProber{CheckFn: func(context.Context, int, core.ProbeRequest) (core.ProbeResult, error) {
		return core.ProbeResult{Ready: true}, nil
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}}
	start := time.Now()
	_, err := w.Wait(context.Background(), core.ProbeTarget{App: "blog", Service: "worker", ContainerID: "c-new"}, core.Readiness{Type: core.ReadinessLog, Pattern: "up"}, nil)
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "fails closed")
	assert.Less(t, time.Since(start), time.Second)
	assert.Empty(t, fp.requests())
}

func TestR34_LogWaiterRereadsUntilBudget(t *testing.T) {
	fp := &fakeProber{CheckFn: func(context.Context, int, core.ProbeRequest) (core.ProbeResult, error) {
		return core.ProbeResult{Detail: `pattern "up" not in logs`}, nil
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}, LogInterval: 40 * time.Millisecond}
	target := core.ProbeTarget{App: "blog", Service: "worker", ContainerID: "c-new", StartedAt: time.Now()}
	res, err := w.Wait(context.Background(), target, core.Readiness{Type: core.ReadinessLog, Pattern: "up", Timeout: core.Duration(300 * time.Millisecond)}, nil)
	require.Error(t, err)
	assert.True(t, errors.Is(err, core.ErrUnavailable))
	assert.Contains(t, err.Error(), `log readiness timeout after 300ms: pattern "up"`)
	assert.GreaterOrEqual(t, res.Attempts, 4)
}

func TestR31_PluginAttemptCapAndConfig(t *testing.T) {
	fp := &fakeProber{CheckFn: func(_ context.Context, n int, req core.ProbeRequest) (core.ProbeResult, error) {
		return core.ProbeResult{Ready: n == 2, Detail: "replica lag"}, nil
	}}
	ps := &fakeProbeSet{p: fp}
	w := &readiness.ReadinessWaiter{Probes: ps, PluginInterval: 10 * time.Millisecond}
	r := core.Readiness{Type: core.ReadinessPlugin, Plugin: "pg", Config: map[string]any{"lag": 5}, Timeout: core.Duration(time.Minute)}
	res, err := w.Wait(context.Background(), tcpTarget, r, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Attempts)
	assert.Equal(t, []string{"plugin/pg"}, ps.lookups)
	req := fp.requests()[0]
	assert.Equal(t, 5*time.Second, req.AttemptTimeout)
	assert.JSONEq(t, `{"lag":5}`, string(req.Config))
}

func TestR33_AttemptCutByBudgetKeepsLastVerdict(t *testing.T) {
	fp := &fakeProber{CheckFn: func(ctx context.Context, n int, _ core.ProbeRequest) (core.ProbeResult, error) {
		if n == 1 {
			return core.ProbeResult{Detail: "127.0.0.1:18081: " + core.ProbeDetailClosedAfterAccept}, nil
		}
		<-ctx.Done() // a connect that hangs until the budget ends
		return core.ProbeResult{}, ctx.Err()
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}, TCPInterval: 20 * time.Millisecond}
	res, err := w.Wait(context.Background(), tcpTarget, core.Readiness{Type: core.ReadinessTCP, Timeout: core.Duration(200 * time.Millisecond)}, nil)
	require.Error(t, err)
	assert.Equal(t, 2, res.Attempts)
	assert.True(t, strings.HasPrefix(err.Error(), "TCP readiness timeout after 200ms on 127.0.0.1:18081"), err.Error())
	assert.True(t, core.IsClosedAfterAccept(err.Error()), "the last verdict, not the cut attempt: %v", err)
}

func TestR31_PluginTimeoutErrorNamesPlugin(t *testing.T) {
	fp := &fakeProber{CheckFn: func(context.Context, int, core.ProbeRequest) (core.ProbeResult, error) {
		return core.ProbeResult{Detail: "replica lag 12s"}, nil
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}, PluginInterval: 20 * time.Millisecond}
	_, err := w.Wait(context.Background(), tcpTarget, core.Readiness{Type: core.ReadinessPlugin, Plugin: "pg", Timeout: core.Duration(100 * time.Millisecond)}, nil)
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "plugin pg readiness timeout after 100ms")
	assert.Contains(t, err.Error(), "replica lag 12s")
}

// R33: a plugin whose side of the propagated deadline ends the call a
// moment before the engine's context fires (gRPC's RST_STREAM CANCEL) has
// hit its attempt's bound: the wait ends in the readiness timeout, not in
// the transport's error.
func TestR33_CheckErrorAtTheAttemptDeadlineIsTheTimeout(t *testing.T) {
	fp := &fakeProber{CheckFn: func(ctx context.Context, _ int, _ core.ProbeRequest) (core.ProbeResult, error) {
		dl, ok := ctx.Deadline()
		require.True(t, ok)
		// The call ends a moment before its deadline: that moment is the
		// input under test, so the fake waits it out.
		time.Sleep(time.Until(dl) - 20*time.Millisecond)
		return core.ProbeResult{}, errors.New("rpc error: code = Canceled desc = stream terminated by RST_STREAM with error code: CANCEL")
	}}
	w := &readiness.ReadinessWaiter{Probes: &fakeProbeSet{p: fp}, PluginInterval: 20 * time.Millisecond}
	_, err := w.Wait(context.Background(), tcpTarget, core.Readiness{Type: core.ReadinessPlugin, Plugin: "hang", Timeout: core.Duration(300 * time.Millisecond)}, nil)
	require.ErrorIs(t, err, core.ErrUnavailable)
	var te *readiness.ReadinessTimeoutError
	require.ErrorAs(t, err, &te, "the attempt's bound, not a backend failure: %v", err)
	assert.Contains(t, err.Error(), "plugin hang readiness timeout after 300ms")
}

// R30: a tcp readiness port no interface declares is internal: the runtime
// publishes only the interfaces' ports, so the probe runs from the helper.
func TestR30_InternalTCPReadinessPortIsNotPublished(t *testing.T) {
	s := core.ServiceSpec{Name: "cache", Readiness: core.Readiness{Type: core.ReadinessTCP, Port: 6379}}
	assert.Empty(t, s.BackendPorts())
	s.HTTP = []core.HTTPInterface{pubHTTP(8080, "blog.example.com")}
	assert.Equal(t, []core.PortSpec{{Port: 8080, Protocol: "tcp"}}, s.BackendPorts())
}
