package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

func request(container, config string) core.ProbeRequest {
	return core.ProbeRequest{
		Target:         core.ProbeTarget{App: "blog", Service: "api", ContainerID: container, StartedAt: time.Now()},
		Readiness:      core.Readiness{Type: core.ReadinessPlugin, Plugin: "exec"},
		Config:         json.RawMessage(config),
		AttemptTimeout: 3 * time.Second,
	}
}

// ValidateConfig requires command and rejects unknown keys
// and wrong types with clear messages (through the wire).
func TestExecProbe_ValidateConfig(t *testing.T) {
	p := sdktest.ServeProbe(t, New())
	ctx := context.Background()
	for _, ok := range []string{`{"command":["/check"]}`, `{"command":["/check","-x"],"user":"1000"}`} {
		probs, err := p.ValidateConfig(ctx, json.RawMessage(ok))
		require.NoError(t, err)
		assert.Empty(t, probs, ok)
	}
	cases := map[string][]string{
		``:                                {"config.command is required"},
		`{}`:                              {"config.command is required"},
		`{"command":"/check"}`:            {"must be an array of strings"},
		`{"command":[]}`:                  {"at least one non-empty element"},
		`{"command":["/c"],"shell":true}`: {`unknown config key "shell"`},
		`{"cmd":["/c"]}`:                  {`unknown config key "cmd"`, "config.command is required"},
		`{"command":["/c"],"user":7}`:     {"config.user must be a string"},
	}
	for cfg, want := range cases {
		probs, err := p.ValidateConfig(ctx, json.RawMessage(cfg))
		require.NoError(t, err)
		require.Len(t, probs, len(want), "config %q: %v", cfg, probs)
		for i, w := range want {
			assert.Contains(t, probs[i], w, "config %q", cfg)
		}
	}
}

// R32.3: the caller's context ending is returned as is.
func TestR32_3_ExecCallerCancelReturned(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New().Check(ctx, request("c-new", `{"command":["/x"]}`))
	require.ErrorIs(t, err, context.Canceled)
}

func TestExecProbe_InvalidConfigIsAnError(t *testing.T) {
	_, err := New().Check(context.Background(), request("c-new", `{"command":[]}`))
	require.ErrorIs(t, err, core.ErrInvalid)
}

// The capture keeps the first MaxDetail bytes and marks truncation.
func TestExecProbe_OutputTruncated(t *testing.T) {
	c := &capped{max: 8}
	_, _ = c.Write([]byte("0123456"))
	_, _ = c.Write([]byte("789abc"))
	assert.Equal(t, "01234567…", c.String())
	c = &capped{max: 8}
	_, _ = c.Write([]byte(" ok \n"))
	assert.Equal(t, "ok", c.String())
}

// runGRPCD starts the grpcd test workload with env and returns its ID.
func runGRPCD(t *testing.T, env ...string) string {
	t.Helper()
	img := testimages.Require(t, "", "grpcd")["grpcd"]
	args := []string{"run", "-d", "--label", "dev.gordon.test=execprobe"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	out, err := exec.Command("docker", append(args, img)...).CombinedOutput()
	require.NoError(t, err, string(out))
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
	return id
}

// Against a real container, exit 0 is ready and anything else is
// not ready with the command's output in Detail; the workload becomes
// SERVING after 2 s, so an early attempt fails and a later one passes.
func TestExecProbe_ReadyOnExitZero(t *testing.T) {
	id := runGRPCD(t, "SERVING_AFTER=2s")
	p := sdktest.ServeProbe(t, New())
	ctx := context.Background()
	check := request(id, `{"command":["/grpcd","-check"]}`)

	res, err := p.Check(ctx, check)
	require.NoError(t, err)
	assert.False(t, res.Ready, res.Detail)
	assert.Regexp(t, `/grpcd -check: exit [12]`, res.Detail)

	assert.Eventually(t, func() bool {
		res, err = p.Check(ctx, check)
		return err == nil && res.Ready
	}, 10*time.Second, 300*time.Millisecond)
	require.NoError(t, err)
	require.True(t, res.Ready, res.Detail)
	assert.Contains(t, res.Detail, "exit 0: status: SERVING")

	// A missing program is not ready (the engine retries), not an error.
	res, err = p.Check(ctx, request(id, `{"command":["/no/such/check"]}`))
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "/no/such/check")
}

// A container that does not exist is ErrNotFound across the wire.
func TestSpec1_3_ExecMissingContainerIsNotFound(t *testing.T) {
	_ = testimages.Require(t, "", "grpcd") // skips without an engine
	p := sdktest.ServeProbe(t, New())
	_, err := p.Check(context.Background(), request("0123456789abcdef0123456789abcdef", `{"command":["/x"]}`))
	require.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "blog")
}
