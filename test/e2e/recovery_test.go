package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

type lifeStatus []struct {
	App      string `json:"app"`
	Stopped  bool   `json:"stopped"`
	Services []struct {
		Service   string `json:"service"`
		Container string `json:"container"`
		State     string `json:"state"`
	} `json:"services"`
}

func appLifeStatus(t testing.TB, state, app string) lifeStatus {
	t.Helper()
	r := fixture.Gordon(t, state, "status", app, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var st lifeStatus
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &st), r.String())
	return st
}

// R41: a container removed behind our back is
// withdrawn from routing within one pass and reported; start rebuilds it
// from the pinned digest.
func TestR41_RemovedBehindOurBackWithdrawnThenRebuilt(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2egone")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File
	fixture.WriteFile(t, file, webManifest(app, v1, "gone.test", ""))
	r := fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	old := appLifeStatus(t, state, app)[0].Services[0].Container

	require.NoError(t, exec.Command("docker", "rm", "-f", old).Run())
	r = fixture.Gordon(t, state, "reconcile", app)
	require.Equal(t, 1, r.Code, "the pass reports the gone container: %s", r.String())
	require.Contains(t, r.Stdout+r.Stderr, old[:12])
	code, _, err := edge.Get("gone.test", "/")
	require.NoError(t, err)
	require.NotEqual(t, 200, code, "withdrawn from routing")

	r = fixture.Gordon(t, state, "start", app)
	require.Equal(t, 0, r.Code, r.String())
	st := appLifeStatus(t, state, app)
	require.NotEqual(t, old, st[0].Services[0].Container, "rebuilt as a new container")
	require.Equal(t, "running", st[0].Services[0].State)
	code, body, err := edge.Get("gone.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	require.Equal(t, "v1", versionOf(body), "rebuilt from the pinned image")
}

// R57: the Docker engine restarted mid-life;
// `reconcile --boot` brings every running app back, verified and routed,
// and leaves stopped apps stopped. It restarts dockerd, so it runs only in
// CI (CI=true) or with GORDON_E2E_RESTART_ENGINE=1, and only when dockerd
// is a plain process this machine started (not a systemd unit).
func TestR57_EngineRestartBootBringsAppsBack(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("GORDON_E2E_RESTART_ENGINE") != "1" {
		t.Skip("restarts dockerd: set GORDON_E2E_RESTART_ENGINE=1 (CI sets CI=true)")
	}
	if exec.Command("systemctl", "is-active", "--quiet", "docker").Run() == nil {
		t.Skip("dockerd is a systemd unit here; not restarting it from a test")
	}
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	state := t.TempDir()
	edge := fixture.StartEdge(t, state)
	for _, app := range []string{"e2eboota", "e2ebootb"} {
		fixture.CleanupApp(t, app)
		file := filepath.Join(t.TempDir(), app+".toml")
		fixture.WriteFile(t, file, webManifest(app, v1, app+".test", ""))
		r := fixture.Gordon(t, state, "deploy", "-f", file)
		require.Equal(t, 0, r.Code, r.String())
	}
	r := fixture.Gordon(t, state, "stop", "e2ebootb")
	require.Equal(t, 0, r.Code, r.String())

	restartDockerd(t)

	r = fixture.Gordon(t, state, "reconcile", "--boot")
	require.Equal(t, 0, r.Code, r.String())
	require.Equal(t, "running", appLifeStatus(t, state, "e2eboota")[0].Services[0].State)
	code, _, err := edge.Get("e2eboota.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, "the running app is back and routed")
	stB := appLifeStatus(t, state, "e2ebootb")[0]
	require.True(t, stB.Stopped)
	require.NotEqual(t, "running", stB.Services[0].State, "the stopped app stays stopped")
}

// restartDockerd stops the shared engine's dockerd (the one whose pidfile
// is /var/run/docker.pid, never a test's second engine or a swarm lab
// node) and starts it again the way .ci/ensure-docker does, then waits for
// `docker info`.
func restartDockerd(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("/var/run/docker.pid")
	require.NoError(t, err, "the shared engine's pidfile")
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err, "the shared engine's pidfile: %q", b)
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 60*time.Second, 200*time.Millisecond,
		"dockerd (pid %d) exits after SIGTERM", pid)
	cmd := exec.Command(filepath.Join(fixture.RepoRoot(), ".ci", "ensure-docker"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Run())
}
