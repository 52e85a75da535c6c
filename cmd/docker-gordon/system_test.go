package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/gordon-deploy/docker-gordon/system"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// --- units (no engine) ---

// TestSystemUnit_BootFlagOnlyWhenReconcileHasIt: --boot is passed only when
// this build's reconcile verb defines it.
func TestSystemUnit_BootFlagOnlyWhenReconcileHasIt(t *testing.T) {
	root := &cobra.Command{Use: "gordon"}
	rc := &cobra.Command{Use: "reconcile", RunE: func(*cobra.Command, []string) error { return nil }}
	root.AddCommand(rc)
	assert.False(t, reconcileHasBoot(root))
	rc.Flags().Bool("boot", false, "")
	assert.True(t, reconcileHasBoot(root))
	assert.False(t, reconcileHasBoot(&cobra.Command{Use: "gordon"}))
	// As a CLI plugin: docker → gordon → system → start.
	docker, system, start := &cobra.Command{Use: "docker"}, &cobra.Command{Use: "system"}, &cobra.Command{Use: "start"}
	docker.AddCommand(root)
	root.AddCommand(system)
	system.AddCommand(start)
	assert.True(t, reconcileHasBoot(start), "found from system start below docker gordon")
}

// --- against the real engine ---

// binaries are the test builds: DOCKER_CONFIG holding
// cli-plugins/docker-gordon, and a directory holding gordon-edge.
type binaries struct{ dockerConfig, binDir string }

// buildBinaries compiles docker-gordon (as a CLI plugin) and gordon-edge
// statically into t's temporary directory, like test/e2e does.
func buildBinaries(t *testing.T) binaries {
	t.Helper()
	tmp := t.TempDir()
	b := binaries{dockerConfig: filepath.Join(tmp, "docker-config"), binDir: filepath.Join(tmp, "bin")}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	for _, p := range []struct{ pkg, out string }{
		{"./cmd/docker-gordon", filepath.Join(b.dockerConfig, "cli-plugins", "docker-gordon")},
		{"./cmd/gordon-edge", filepath.Join(b.binDir, "gordon-edge")},
	} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", p.out, p.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go build %s: %s", p.pkg, out)
	}
	return b
}

// TestSystemContainers_EdgeStartAndSystemStart runs the engine-backed system container
// tests with one build of the binaries.
func TestSystemContainers_EdgeStartAndSystemStart(t *testing.T) {
	cli := engineClient(t)
	bins := buildBinaries(t)
	t.Run("EdgeStartRunsSystemContainer", func(t *testing.T) { testEdgeStartRunsSystemContainer(t, cli, bins) })
	t.Run("SystemStartRunsEdgeAndReconcile", func(t *testing.T) { testSystemStartRunsEdgeAndReconcile(t, cli, bins) })
}

// engineClient skips the test when no engine answers, and when system
// containers already exist on it (not ours to touch).
func engineClient(t *testing.T) *client.Client {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker CLI not found")
	}
	cli, err := client.New(client.FromEnv)
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Skipf("Docker engine not available: %v", err)
	}
	for _, n := range []string{docker.EdgeName, docker.ReconcileName} {
		if _, err := cli.ContainerInspect(ctx, n, client.ContainerInspectOptions{}); err == nil {
			t.Skipf("container %s already exists on this engine; not touching it", n)
		}
	}
	return cli
}

// cleanupSystem force-removes our system containers (those of stateDir).
func cleanupSystem(t *testing.T, cli *client.Client, stateDir string) {
	started := time.Now()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range []string{docker.EdgeName, docker.ReconcileName} {
			got, err := cli.ContainerInspect(ctx, n, client.ContainerInspectOptions{})
			if err == nil && got.Container.Config.Labels[docker.LabelStateDir] == stateDir {
				_, _ = cli.ContainerRemove(ctx, got.Container.ID, client.ContainerRemoveOptions{Force: true})
			}
		}
		// Images this test built (not in use by anything else).
		imgs, err := cli.ImageList(ctx, client.ImageListOptions{})
		if err != nil {
			return
		}
		for _, im := range imgs.Items {
			if im.Created >= started.Unix()-1 && slices.ContainsFunc(im.RepoTags, func(tag string) bool { return strings.HasPrefix(tag, "gordon-system/") }) {
				_, _ = cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{PruneChildren: true})
			}
		}
	})
}

type run struct {
	out, err string
	code     int
}

// dockerGordon runs `docker gordon ARGS` with the test build and stateDir.
func dockerGordon(t *testing.T, b binaries, stateDir string, args ...string) run {
	t.Helper()
	cfg, bin := b.dockerConfig, b.binDir
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", append([]string{"gordon"}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cfg, "GORDON_STATE_DIR="+stateDir, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := run{out: so.String(), err: se.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		r.code = -1
		r.err += err.Error()
	}
	return r
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func inspect(t *testing.T, cli *client.Client, name string) container.InspectResponse {
	t.Helper()
	got, err := cli.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	require.NoError(t, err)
	return got.Container
}

func requireGone(t *testing.T, cli *client.Client, name string) {
	t.Helper()
	_, err := cli.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	require.Error(t, err)
	assert.True(t, cerrdefs.IsNotFound(err), "%s: %v", name, err)
}

// testEdgeStartRunsSystemContainer: `edge start` runs
// gordon-edge as a Docker-managed container (host network, restart
// unless-stopped, state directory at the same path) that serves HTTP;
// a second start leaves it alone; status and logs show it; `edge stop`
// removes it.
func testEdgeStartRunsSystemContainer(t *testing.T, cli *client.Client, bins binaries) {
	state := t.TempDir()
	cleanupSystem(t, cli, state)
	httpAddr, adminAddr := freePort(t), freePort(t)

	r := dockerGordon(t, bins, state, "edge", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr)
	require.Equal(t, 0, r.code, "%+v", r)
	assert.Contains(t, r.out, "gordon-edge: started")

	c := inspect(t, cli, docker.EdgeName)
	require.NotNil(t, c.State)
	assert.True(t, c.State.Running)
	assert.Equal(t, container.NetworkMode("host"), c.HostConfig.NetworkMode)
	// R41.9: the watcher runs beside the edge (reconcile --watch, no --boot).
	assert.Contains(t, r.out, "gordon-reconcile: started")
	w := inspect(t, cli, docker.ReconcileName)
	assert.True(t, w.State.Running, "watcher: %+v", w.State)
	assert.Equal(t, []string{"gordon", "reconcile", "--watch"}, []string(w.Config.Cmd))
	assert.Equal(t, container.RestartPolicyUnlessStopped, c.HostConfig.RestartPolicy.Name)
	assert.Contains(t, c.HostConfig.Binds, state+":"+state)
	assert.Equal(t, "true", c.Config.Labels[docker.LabelManaged])
	assert.Equal(t, docker.RoleSystem, c.Config.Labels[docker.LabelRole])
	assert.True(t, strings.HasPrefix(c.Config.Image, "gordon-system/edge:"), c.Config.Image)

	// It answers HTTP: an unknown host is a 404 from the edge.
	var code int
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/", nil)
		req.Host = "unknown.invalid"
		resp, err := (&http.Client{Timeout: time.Second}).Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		code = resp.StatusCode
		return true
	}, 20*time.Second, 200*time.Millisecond)
	assert.Equal(t, http.StatusNotFound, code)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(state, "edge", "status.json"))
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "the edge writes status.json into the bind-mounted state directory")

	// Idempotent.
	r = dockerGordon(t, bins, state, "edge", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr)
	require.Equal(t, 0, r.code, "%+v", r)
	assert.Contains(t, r.out, "already running")
	assert.Equal(t, c.ID, inspect(t, cli, docker.EdgeName).ID)

	// Another state directory may not take it over.
	other := t.TempDir()
	r = dockerGordon(t, bins, other, "edge", "start", "--http-addr", httpAddr)
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.err, "serves state directory "+state)
	assert.Contains(t, r.err, "docker gordon edge run", "the refusal names the foreground edge of this state directory")
	assert.Equal(t, c.ID, inspect(t, cli, docker.EdgeName).ID)

	r = dockerGordon(t, bins, state, "edge", "status", "--format", "json")
	require.Equal(t, 0, r.code, "%+v", r)
	var st struct {
		AppliedGeneration uint64         `json:"applied_generation"`
		Container         *docker.Status `json:"container"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &st), r.out)
	require.NotNil(t, st.Container)
	assert.Equal(t, "running", st.Container.State)
	assert.Equal(t, "unless-stopped", st.Container.RestartPolicy)
	assert.NotNil(t, st.Container.StartedAt)

	r = dockerGordon(t, bins, state, "edge", "logs", "--tail", "20")
	require.Equal(t, 0, r.code, "%+v", r)
	assert.Contains(t, r.out+r.err, "serving")
	assert.NotContains(t, r.out, "unknown.invalid", "edge logs shows the edge's own log, not its access log")

	// The 404 above is in its access log (the container's stdout; flushed
	// within 500 ms), which holds nothing else.
	require.Eventually(t, func() bool {
		r = dockerGordon(t, bins, state, "edge", "logs", "--access")
		return r.code == 0 && strings.Contains(r.out, `"host":"unknown.invalid"`) && strings.Contains(r.out, `"status":404`)
	}, 10*time.Second, 200*time.Millisecond, "edge logs --access never showed the 404")
	assert.NotContains(t, r.out, "serving", "edge logs --access shows access lines only")

	// Different flags replace the container.
	httpAddr2 := freePort(t)
	r = dockerGordon(t, bins, state, "edge", "start", "--http-addr", httpAddr2, "--admin-addr", adminAddr)
	require.Equal(t, 0, r.code, "%+v", r)
	assert.Contains(t, r.out, "replaced")
	c2 := inspect(t, cli, docker.EdgeName)
	assert.NotEqual(t, c.ID, c2.ID)
	assert.Contains(t, c2.Config.Cmd, httpAddr2)

	r = dockerGordon(t, bins, state, "edge", "stop")
	require.Equal(t, 0, r.code, "%+v", r)
	assert.Contains(t, r.out, "stopped and removed")
	requireGone(t, cli, docker.EdgeName)
	requireGone(t, cli, docker.ReconcileName) // edge start's watcher goes with it
	r = dockerGordon(t, bins, state, "edge", "stop")
	require.Equal(t, 0, r.code, "%+v", r)
	assert.Contains(t, r.out, "not running")

	// A port that is taken: start fails and quotes the edge's error.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	r = dockerGordon(t, bins, state, "edge", "start", "--http-addr", busy.Addr().String(), "--admin-addr", adminAddr)
	assert.NotEqual(t, 0, r.code, "%+v", r)
	assert.Contains(t, r.err, "exited right after start")
	assert.Contains(t, r.err, "address already in use")
	assert.Contains(t, r.err, "was removed")
	requireGone(t, cli, docker.EdgeName) // a refused start leaves no crash-looping container
	r = dockerGordon(t, bins, state, "edge", "stop")
	require.Equal(t, 0, r.code, "%+v", r)

	// Without flags, a start comes back where the last successful one
	// listened (not on the default :80), and says so; edge status shows
	// the listener.
	r = dockerGordon(t, bins, state, "edge", "start")
	require.Equal(t, 0, r.code, "%+v", r)
	assert.Contains(t, r.out, "HTTP on "+httpAddr2)
	assert.Contains(t, r.out, "as at the last start")
	assert.Contains(t, inspect(t, cli, docker.EdgeName).Config.Cmd, httpAddr2)
	require.Eventually(t, func() bool {
		r = dockerGordon(t, bins, state, "edge", "status")
		return r.code == 0 && strings.Contains(r.out, "listening: http "+httpAddr2)
	}, 10*time.Second, 200*time.Millisecond, "%+v", r)
	r = dockerGordon(t, bins, state, "edge", "stop")
	require.Equal(t, 0, r.code, "%+v", r)
	requireGone(t, cli, docker.EdgeName)
}

// testSystemStartRunsEdgeAndReconcile: `system start` runs the
// edge and the reconcile loop (the CLI run directly in a FROM-scratch image,
// engine socket mounted); the loop keeps running; `system status` shows
// both; `system stop` removes both.
func testSystemStartRunsEdgeAndReconcile(t *testing.T, cli *client.Client, bins binaries) {
	state := t.TempDir()
	cleanupSystem(t, cli, state)
	httpAddr, adminAddr := freePort(t), freePort(t)

	r := dockerGordon(t, bins, state, "system", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr, "--interval", "1s")
	require.Equal(t, 0, r.code, "%+v", r)
	assert.Contains(t, r.out, "gordon-edge: started")
	assert.Contains(t, r.out, "gordon-reconcile: started")

	rc := inspect(t, cli, docker.ReconcileName)
	assert.Equal(t, []string{"/docker-gordon"}, []string(rc.Config.Entrypoint))
	assert.Equal(t, []string{"gordon", "reconcile", "--watch"}, []string(rc.Config.Cmd[:3]))
	assert.Contains(t, []string(rc.Config.Cmd), "--boot", "system start's watcher brings apps back at boot")
	assert.Contains(t, rc.HostConfig.Binds, "/var/run/docker.sock:/var/run/docker.sock")
	assert.Equal(t, container.RestartPolicyUnlessStopped, rc.HostConfig.RestartPolicy.Name)
	assert.Equal(t, container.NetworkMode("host"), rc.HostConfig.NetworkMode)

	// Several passes run (1s interval) and the loop is still up, never
	// restarted: plugins start inside the container and the engine answers.
	// The behaviour under test is the passage of time: a crash loop would
	// show within these passes.
	time.Sleep(4 * time.Second)
	rc = inspect(t, cli, docker.ReconcileName)
	assert.True(t, rc.State.Running, "reconcile container: %+v", rc.State)
	assert.Equal(t, 0, rc.RestartCount)
	if !rc.State.Running || rc.RestartCount > 0 {
		out, _ := exec.Command("docker", "logs", "--tail", "30", docker.ReconcileName).CombinedOutput()
		t.Logf("reconcile logs:\n%s", out)
	}

	r = dockerGordon(t, bins, state, "system", "status", "--format", "json")
	require.Equal(t, 0, r.code, "%+v", r)
	var view system.StatusView
	require.NoError(t, json.Unmarshal([]byte(r.out), &view), r.out)
	require.Len(t, view.Containers, 2)
	names := []string{view.Containers[0].Name, view.Containers[1].Name}
	assert.True(t, slices.Equal([]string{docker.EdgeName, docker.ReconcileName}, names), names)
	for _, c := range view.Containers {
		assert.Equal(t, "running", c.State, c.Name)
		assert.Equal(t, state, c.StateDir, c.Name)
	}

	r = dockerGordon(t, bins, state, "system", "logs", "nope")
	assert.NotEqual(t, 0, r.code)

	// edge start leaves system start's watcher (with --boot) alone, and
	// edge stop does not stop it.
	before := inspect(t, cli, docker.ReconcileName).ID
	r = dockerGordon(t, bins, state, "edge", "start")
	require.Equal(t, 0, r.code, "%+v", r)
	assert.Contains(t, r.out, "gordon-reconcile: left as is")
	r = dockerGordon(t, bins, state, "edge", "stop")
	require.Equal(t, 0, r.code, "%+v", r)
	assert.Equal(t, before, inspect(t, cli, docker.ReconcileName).ID, "system start's watcher kept")

	r = dockerGordon(t, bins, state, "system", "stop")
	require.Equal(t, 0, r.code, "%+v", r)
	requireGone(t, cli, docker.EdgeName)
	requireGone(t, cli, docker.ReconcileName)
}

// A verb given the wrong number of arguments says which command and shows
// its usage line (newcomer report: "accepts 1 arg(s), received 0" alone).
func TestCLI_ArgumentErrorsNameCommandAndUsage(t *testing.T) {
	root := &cobra.Command{Use: "gordon"}
	ops := &cobra.Command{Use: "ops APP [OP]", Args: usageArgs(cobra.RangeArgs(1, 2)), RunE: func(*cobra.Command, []string) error { return nil }}
	root.AddCommand(ops)
	err := ops.Args(ops, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gordon ops: accepts between 1 and 2 arg(s), received 0")
	assert.Contains(t, err.Error(), "usage: gordon ops APP [OP]")
	assert.NoError(t, ops.Args(ops, []string{"app"}))
}

// A manifest given as a positional argument gets a hint to pass it with -f.
func TestCLI_FileGivenWithoutDashFIsNamed(t *testing.T) {
	root := &cobra.Command{Use: "gordon"}
	validate := &cobra.Command{Use: "validate -f FILE", Args: usageArgs(cobra.NoArgs), RunE: func(*cobra.Command, []string) error { return nil }}
	validate.Flags().StringArrayP("file", "f", nil, "")
	root.AddCommand(validate)
	file := filepath.Join(t.TempDir(), "shop.toml")
	require.NoError(t, os.WriteFile(file, []byte("name = \"shop\"\n"), 0o600))
	err := validate.Args(validate, []string{file})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is a file: pass it with -f (gordon validate -f "+file+")")
	err = validate.Args(validate, []string{"no-such.toml"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "pass it with -f", "only an existing file gets the hint")
}
