package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

// healthServer runs a grpc.health.v1 server on loopback; it returns the
// address and the health server whose statuses the test sets.
func healthServer(t *testing.T) (string, *health.Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := health.NewServer()
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	return l.Addr().String(), hs
}

func request(addr string, config string) core.ProbeRequest {
	r := core.ProbeRequest{
		Target:         core.ProbeTarget{App: "blog", Service: "api", ContainerID: "c-new", Address: addr, Port: 8080, StartedAt: time.Now()},
		Readiness:      core.Readiness{Type: core.ReadinessPlugin, Plugin: "grpc"},
		AttemptTimeout: time.Second,
	}
	if config != "" {
		r.Config = json.RawMessage(config)
	}
	return r
}

func TestProbeSuite_GRPC(t *testing.T) {
	sdktest.ProbeSuite(t, func(t *testing.T) core.Prober { return New() })
	sdktest.ProbeSuite(t, func(t *testing.T) core.Prober { return sdktest.ServeProbe(t, New()) })
}

// Ready iff the health answer is SERVING; one attempt per Check.
func TestGRPCProbe_ReadyOnlyWhenServing(t *testing.T) {
	addr, hs := healthServer(t)
	p := sdktest.ServeProbe(t, New())
	ctx := context.Background()

	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	res, err := p.Check(ctx, request(addr, ""))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "NOT_SERVING")

	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	res, err = p.Check(ctx, request(addr, ""))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)
	assert.Contains(t, res.Detail, "SERVING")
}

// config.service selects the health service; an unknown one is
// not ready with the server's answer as detail.
func TestGRPCProbe_NamedService(t *testing.T) {
	addr, hs := healthServer(t)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus("blog.Posts", healthpb.HealthCheckResponse_SERVING)
	p := New()

	res, err := p.Check(context.Background(), request(addr, `{"service":"blog.Posts"}`))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)

	res, err = p.Check(context.Background(), request(addr, `{"service":"nope"}`))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "NotFound")
}

// R31/R32: a refused connection is not ready (not an error) and the attempt
// is bounded; a server that never answers is cut at AttemptTimeout.
func TestR31_GRPCAttemptIsBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never speaks HTTP/2
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	req := request(l.Addr().String(), "")
	req.AttemptTimeout = 300 * time.Millisecond
	t0 := time.Now()
	res, err := New().Check(context.Background(), req)
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Less(t, time.Since(t0), 3*time.Second)
	assert.NotEmpty(t, res.Detail)
}

// R32.3: the caller's context ending is returned as is.
func TestR32_3_GRPCCallerCancelReturned(t *testing.T) {
	addr, _ := healthServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New().Check(ctx, request(addr, ""))
	require.ErrorIs(t, err, context.Canceled)
}

// ValidateConfig rejects unknown keys and wrong types with
// clear messages, and accepts the documented shapes.
func TestGRPCProbe_ValidateConfig(t *testing.T) {
	p := sdktest.ServeProbe(t, New())
	ctx := context.Background()
	for _, ok := range []string{"", "null", "{}", `{"service":""}`, `{"service":"blog.Posts"}`} {
		probs, err := p.ValidateConfig(ctx, json.RawMessage(ok))
		require.NoError(t, err)
		assert.Empty(t, probs, "config %q", ok)
	}
	probs, err := p.ValidateConfig(ctx, json.RawMessage(`{"servce":"x","timeout":"1s"}`))
	require.NoError(t, err)
	require.Len(t, probs, 2)
	assert.Contains(t, probs[0], `unknown config key "servce"`)
	assert.Contains(t, probs[0], `"service"`)
	assert.Contains(t, probs[1], `unknown config key "timeout"`)

	probs, err = p.ValidateConfig(ctx, json.RawMessage(`{"service":3}`))
	require.NoError(t, err)
	require.Len(t, probs, 1)
	assert.Contains(t, probs[0], "must be a string")

	probs, err = p.ValidateConfig(ctx, json.RawMessage(`[1]`))
	require.NoError(t, err)
	require.Len(t, probs, 1)
	assert.Contains(t, probs[0], "must be a table")
}

// An empty address (no loopback bind) is a config error, not "not ready".
func TestR30_GRPCWithoutAddressIsInvalid(t *testing.T) {
	_, err := New().Check(context.Background(), request("", ""))
	require.ErrorIs(t, err, core.ErrInvalid)
}

// The built binary runs as a real go-plugin subprocess found on
// the plugin path, and Describe/Check cross the process boundary.
func TestGRPCProbe_RunsAsSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "gordon-probe-grpc")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))

	h, err := sdk.NewHost(sdk.HostConfig{Builtins: []string{}, PluginDirs: []string{dir}})
	require.NoError(t, err)
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := h.Probe(ctx, "grpc")
	require.NoError(t, err)
	info, err := p.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, "grpc", info.Name)

	addr, hs := healthServer(t)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	res, err := p.Check(ctx, request(addr, ""))
	require.NoError(t, err)
	assert.True(t, res.Ready, res.Detail)
	_, err = p.Check(ctx, request("", ""))
	require.True(t, errors.Is(err, core.ErrInvalid), "class survives the wire: %v", err)
}
