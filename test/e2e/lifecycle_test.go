package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// Lifecycle verbs: stop, start, restart, remove of an app with a
// stateless and a stateful service; each verb's exit status and effect
// match SPEC (R50–R55); volumes survive remove; a re-deploy after remove
// reuses them.
func TestR55_StopStartRestartRemoveRedeploy(t *testing.T) {
	imgs := testimages.Require(t, "v1", "httpd", "kv")
	a := fixture.NewApp(t, "e2elife")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File
	fixture.WriteFile(t, file, fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "3s"
[[services.web.http]]
port = 8080
host = "life.test"
[services.kv]
image = %q
stop_grace = "3s"
[[services.kv.http]]
port = 8080
host = "kv.life.test"
[[services.kv.volume]]
name = "data"
path = "/data"
[services.kv.readiness]
type = "log"
pattern = "ready"
timeout = "20s"
`, app, imgs["httpd"], imgs["kv"]))
	r := fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	require.Regexp(t, `(?m)^web\s+deployed\s+new\s`, r.Stdout, "a first deployment has nothing to replace")
	require.NoError(t, edge.Put("kv.life.test", "/k/x", "kept"))

	running := func() int {
		out, err := exec.Command("docker", "ps", "-q", "--filter", "label=dev.gordon.app="+app).Output()
		require.NoError(t, err)
		return len(strings.Fields(string(out)))
	}

	r = fixture.Gordon(t, state, "stop", app)
	require.Equal(t, 0, r.Code, r.String())
	require.Zero(t, running(), "stop leaves nothing running")
	code, _, err := edge.Get("life.test", "/")
	require.NoError(t, err)
	require.Equal(t, 503, code, "a stopped app is not routed: it answers 503 (R58)")

	r = fixture.Gordon(t, state, "start", app)
	require.Equal(t, 0, r.Code, r.String())
	require.Equal(t, 2, running())
	code, _, err = edge.Get("life.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)

	r = fixture.Gordon(t, state, "restart", app)
	require.Equal(t, 0, r.Code, r.String())
	code, body, err := edge.Get("kv.life.test", "/k/x")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	require.Equal(t, "kept", strings.TrimSpace(body))

	r = fixture.Gordon(t, state, "remove", app)
	require.Equal(t, 0, r.Code, r.String())
	require.Regexp(t, `(?m)^web\s+removed\s`, r.Stdout)
	require.Empty(t, fixture.Managed(t, app, ""), "remove leaves no container")
	require.NoError(t, exec.Command("docker", "volume", "inspect", "gordon-"+app+"-data").Run(), "the volume survives remove")

	// The kept volume belongs to the removed incarnation (SPEC R13): the
	// new one is refused, changing nothing, until the manifest adopts it.
	r = fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, "adopt = true")
	require.Empty(t, fixture.Managed(t, app, ""), "a refused deploy creates nothing")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	fixture.WriteFile(t, file, strings.Replace(string(data), "path = \"/data\"\n", "path = \"/data\"\nadopt = true\n", 1))
	r = fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	code, body, err = edge.Get("kv.life.test", "/k/x")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	require.Equal(t, "kept", strings.TrimSpace(body), "a re-deploy that adopts the volume after remove reuses it")

	// Bad input: unknown app, unknown service: exit 1, nothing changed.
	r = fixture.Gordon(t, state, "restart", "nosuchapp")
	require.Equal(t, 1, r.Code, r.String())
	r = fixture.Gordon(t, state, "restart", app, "--service", "nosuch")
	require.Equal(t, 1, r.Code, r.String())

	// With the edge stopped: edge status says so, and a deploy fails
	// before it changes anything instead of at the switch.
	edge.Stop()
	r = fixture.Gordon(t, state, "edge", "status")
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stdout, "edge: not running")
	r = fixture.Gordon(t, state, "status", app)
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stderr, "the edge proxy is not running")
	before := fixture.Managed(t, app, "")
	start := time.Now()
	r = fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, "the edge proxy is not running")
	require.Contains(t, r.Stderr, "docker gordon edge start")
	require.Less(t, time.Since(start), 8*time.Second)
	require.Equal(t, before, fixture.Managed(t, app, ""), "nothing was created or replaced")
}
