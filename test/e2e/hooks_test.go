package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// hookOK and hookFail are hooks the scratch httpd image can run: a GET of
// its own loopback (exit 0, so it ran inside the new container) and of a
// closed port (exit 1, "connection refused" on stderr).
const (
	hookOK   = `["/httpd", "-get", "http://127.0.0.1:8080/healthz"]`
	hookFail = `["/httpd", "-get", "http://127.0.0.1:1/"]`
)

func hooksManifest(app, image, version, before, after string) string {
	return fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "2s"
[services.web.env]
VERSION = %q
[[services.web.http]]
port = 8080
host = "hooks.test"
[services.web.readiness]
type = "http"
path = "/healthz"
timeout = "30s"
[services.web.hooks]
before_switch = %s
after_switch = %s
timeout = "20s"
`, app, image, version, before, after)
}

// stepOf returns the journaled step id of op (zero when absent).
func stepOf(op fixture.DeployOp, id string) (s struct{ ID, State, Before, After, Detail, Error string }) {
	for _, st := range op.Steps {
		if st.ID == id {
			return st
		}
	}
	return s
}

// TestR72_HooksRunAroundTheSwitchAndAreJournaled (real engine): hooks run
// with docker exec in the new container; a failing before_switch fails the
// deploy (exit 1) and the old generation keeps serving; a failing
// after_switch is reported (exit 2) while the new generation serves; `ops`
// shows every hook with its exit status and duration.
func TestR72_HooksRunAroundTheSwitchAndAreJournaled(t *testing.T) {
	imgs := testimages.Require(t, "v1", "httpd")
	a := fixture.NewApp(t, "e2ehooks")

	op := a.MustDeploy(hooksManifest(a.Name, imgs["httpd"], "one", hookOK, hookOK))
	for _, name := range []string{"before_switch", "after_switch"} {
		st := stepOf(op, "service.web.hook."+name)
		assert.Equal(t, "succeeded", st.State, name)
		assert.Regexp(t, `^`+name+` in [0-9a-f]{12}: exit 0 after \S+$`, st.Detail, name)
	}
	_, body, err := a.Edge.Get("hooks.test", "/")
	require.NoError(t, err)
	require.Contains(t, body, "version=one")

	// before_switch fails: nothing switches, the candidate is gone.
	op, r := a.Deploy(hooksManifest(a.Name, imgs["httpd"], "two", hookFail, hookOK))
	require.Equal(t, 1, r.Code, r.String())
	assert.Regexp(t, `before_switch hook "/httpd -get http://127\.0\.0\.1:1/" in [0-9a-f]{12} exited with status 1`, r.Stderr)
	assert.Regexp(t, `web\s+hook\s+\S+\s+before_switch: .*connection refused`, r.Stderr, "the hook's output is in the progress")
	st := stepOf(op, "service.web.hook.before_switch")
	assert.Equal(t, "failed", st.State)
	assert.Regexp(t, `^before_switch in [0-9a-f]{12}: exit 1 after \S+$`, st.Detail)
	assert.Empty(t, stepOf(op, "service.web.hook.after_switch").ID, "after_switch never ran")
	_, body, err = a.Edge.Get("hooks.test", "/")
	require.NoError(t, err)
	assert.Contains(t, body, "version=one", "the old generation keeps serving")
	assert.Len(t, fixture.Managed(t, a.Name, "web"), 1, "the failed candidate is removed")

	r = a.Gordon("ops", a.Name, op.ID)
	require.Equal(t, 0, r.Code, r.String())
	assert.Regexp(t, `(?m)^service\.web\.hook\.before_switch\s+failed\s+-\s+-\s+before_switch in \S+: exit 1 after \S+\s+`, r.Stdout)

	// after_switch fails: the switch stands, the deploy says so.
	op, r = a.Deploy(hooksManifest(a.Name, imgs["httpd"], "three", hookOK, hookFail))
	require.Equal(t, 2, r.Code, r.String())
	assert.Contains(t, r.Stderr, "after_switch hook failed")
	assert.Equal(t, "partial", op.Outcome)
	_, body, err = a.Edge.Get("hooks.test", "/")
	require.NoError(t, err)
	assert.Contains(t, body, "version=three", "the new generation serves")
	r = a.Gordon("ops", a.Name, op.ID)
	require.Equal(t, 0, r.Code, r.String())
	assert.Regexp(t, `(?m)^service\.web\.hook\.before_switch\s+succeeded\s+.*exit 0 after`, r.Stdout)
	assert.Regexp(t, `(?m)^service\.web\.hook\.after_switch\s+failed\s+.*exit 1 after`, r.Stdout)
}

// TestR72_ComposePostStartAndPreStop (real engine): compose's post_start
// runs in the new container before its readiness (a failing one fails the
// deploy and the old generation keeps serving); pre_stop runs before the
// stop signal and, when it fails, `stop` warns and stops anyway.
func TestR72_ComposePostStartAndPreStop(t *testing.T) {
	imgs := testimages.Require(t, "v1", "httpd")
	a := fixture.NewApp(t, "e2ehookscompose")
	compose := func(version, postStart, preStop string) string {
		return fmt.Sprintf(`name: %s
services:
  web:
    image: %s
    environment: { VERSION: %s }
    stop_grace_period: 2s
    post_start:
      - command: %s
    pre_stop:
      - command: %s
    x-gordon:
      host: hookscompose.test
      port: 8080
      readiness: { type: http, path: /healthz, timeout: 30s }
`, a.Name, imgs["httpd"], version, postStart, preStop)
	}
	file := filepath.Join(t.TempDir(), "compose.yaml")
	deploy := func(doc string) fixture.Result {
		fixture.WriteFile(t, file, doc)
		return a.Gordon("deploy", "-f", file)
	}
	// post_start runs before the program may listen: its succeeding
	// command needs no server (flag's -h exits 0).
	r := deploy(compose("one", `["/httpd", "-h"]`, hookFail))
	require.Equal(t, 0, r.Code, r.String())
	assert.Regexp(t, `web\s+hook\s+\S+\s+post_start: `, r.Stderr)
	_, body, err := a.Edge.Get("hookscompose.test", "/")
	require.NoError(t, err)
	require.Contains(t, body, "version=one")

	r = deploy(compose("two", hookFail, hookFail))
	require.Equal(t, 1, r.Code, r.String())
	assert.Regexp(t, `post_start hook "/httpd -get http://127\.0\.0\.1:1/" in [0-9a-f]{12} exited with status 1`, r.Stderr)
	_, body, err = a.Edge.Get("hookscompose.test", "/")
	require.NoError(t, err)
	assert.Contains(t, body, "version=one", "the old generation keeps serving")

	r = a.Gordon("stop", a.Name)
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stderr, "pre_stop hook failed (stopped anyway)")
	assert.Empty(t, fixture.Running(a.Name, "web"))
}
