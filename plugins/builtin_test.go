package plugins

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// TestMain lets the test binary act as docker-gordon in plugin mode, so the
// re-exec path is tested exactly as main uses it.
func TestMain(m *testing.M) {
	if ServeBuiltinIfRequested() {
		return
	}
	os.Exit(m.Run())
}

// STYLE 5: one explicit table; the SDK's default list is the same set.
func TestStyle5_BuiltinTableMatchesSDKDefaults(t *testing.T) {
	assert.Equal(t, []string{"probe/http", "probe/log", "probe/tcp", "runtime/docker", "runtime/swarm", "traffic/edge"}, Names())
	assert.Equal(t, sdk.DefaultBuiltins, Names())
	for _, b := range builtins {
		n := 0
		for _, f := range []bool{b.runtime != nil, b.probe != nil, b.traffic != nil} {
			if f {
				n++
			}
		}
		assert.Equal(t, 1, n, "%s: exactly one factory", b.id())
		switch b.kind {
		case sdk.KindRuntime:
			assert.NotNil(t, b.runtime, b.id())
		case sdk.KindProbe:
			assert.NotNil(t, b.probe, b.id())
		case sdk.KindTraffic:
			assert.NotNil(t, b.traffic, b.id())
		}
	}
}

func TestArch1_NotPluginModeWithoutEnv(t *testing.T) {
	t.Setenv(sdk.EnvPlugin, "")
	assert.False(t, ServeBuiltinIfRequested())
}

func TestArch1_UnknownBuiltinIsNotFound(t *testing.T) {
	err := serveBuiltin("probe/nope")
	require.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "probe/nope")
}

func newHost(t *testing.T, env ...string) *sdk.Host {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	h, err := sdk.NewHost(sdk.HostConfig{SelfExe: self, Builtins: Names(), PluginDirs: []string{}, Env: env, StartTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h
}

// ARCHITECTURE §1: every built-in is served by re-executing the binary
// with GORDON_PLUGIN and answers Describe as itself.
func TestArch1_EveryBuiltinServesThroughReexec(t *testing.T) {
	h := newHost(t, EnvStateDir+"="+t.TempDir())
	ctx := context.Background()
	for _, id := range Names() {
		kind, name, err := sdk.ParseID(id)
		require.NoError(t, err)
		info, err := h.Describe(ctx, kind, name)
		require.NoError(t, err, id)
		assert.Equal(t, kind, info.Kind)
		assert.Equal(t, name, info.Name)
		assert.Equal(t, sdk.ProtocolVersion, info.ProtocolVersion)
		assert.NotEqual(t, os.Getpid(), info.PID, "%s runs in its own process", id)
	}
}

// R32: the built-in tcp probe answers a real check across the process
// boundary.
func TestR32_BuiltinTCPProbeChecksThroughSubprocess(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("banner\n"))
			_ = c.Close()
		}
	}()
	p, err := newHost(t).Probe(context.Background(), "tcp")
	require.NoError(t, err)
	res, err := p.Check(context.Background(), core.ProbeRequest{
		Target:         core.ProbeTarget{App: "a", Service: "s", ContainerID: "c", Address: l.Addr().String(), StartedAt: time.Now()},
		Readiness:      core.Readiness{Type: core.ReadinessTCP},
		AttemptTimeout: 2 * time.Second,
	})
	require.NoError(t, err)
	assert.True(t, res.Ready, "detail: %s", res.Detail)
}

// traffic/edge needs the state directory: without it the plugin exits
// before the handshake and the error names it.
func TestArch1_EdgeWithoutStateDirFailsNamingThePlugin(t *testing.T) {
	t.Setenv(EnvStateDir, "")
	_, err := newHost(t).Traffic(context.Background(), "edge")
	require.ErrorIs(t, err, core.ErrPluginExited)
	assert.Contains(t, err.Error(), "traffic/edge")
}

// ARCHITECTURE §4, §9: the built-in docker runtime, launched as a real
// subprocess plugin, passes the runtime conformance suite against the
// local Docker engine (skipped when no engine answers).
func TestArch4_DockerRuntimeSuiteThroughSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Docker engine")
	}
	refs := testimages.Require(t, "", "httpd")
	h := newHost(t)
	sdktest.RuntimeSuite(t, func(t *testing.T) (core.Runtime, sdktest.ImageForTests) {
		rt, err := h.Runtime(context.Background(), "docker")
		require.NoError(t, err)
		return rt, sdktest.ImageForTests{Ref: refs["httpd"], Port: 8080, LogMarker: "listening on"}
	})
}
