package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// engine2 is a second Docker engine started by a test on this machine: its
// own data root, exec root, pidfile and unix socket, listening on
// tcp://127.0.0.1:PORT, its own default bridge interface (not docker0:
// see startEngine2), no iptables, its own address pool, and engine labels that place its gordon state directory and its
// socket (as the runner container must mount them) under the test's
// directory instead of /var/lib/docker-gordon. It is reached through a
// docker context named Context.
type engine2 struct {
	Dir      string
	Sock     string // unix socket path
	TCP      string // tcp://127.0.0.1:PORT
	StateDir string // the "server's" state directory
	Context  string
	bridge   string   // its default bridge interface
	args     []string // dockerd's arguments (restart reuses them)
	netns    string   // its network namespace ("" = the host's)
	cmd      *exec.Cmd
}

// startEngine2 starts the engine and registers its cleanup (containers,
// networks, then the daemon, then its directories and the context). It
// must not be restarted (see startEngine2InNetns).
func startEngine2(t *testing.T) *engine2 {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "g2e-")
	require.NoError(t, err)
	e := &engine2{Dir: dir, Sock: filepath.Join(dir, "d.sock"), TCP: "tcp://" + fixture.FreeAddr(t), StateDir: filepath.Join(dir, "state"),
		Context: "gordon-e2e-" + filepath.Base(dir)}
	// Its own default bridge: with --bridge none, dockerd deletes the
	// interface docker0 at start, which is the shared engine's.
	e.bridge = "g2br" + strings.TrimPrefix(filepath.Base(dir), "g2e-")
	if len(e.bridge) > 15 {
		e.bridge = e.bridge[:15]
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", e.bridge).Run() }) // after the daemon stopped
	for _, args := range [][]string{{"link", "add", "name", e.bridge, "type", "bridge"}, {"addr", "add", "10.212.0.1/24", "dev", e.bridge}, {"link", "set", e.bridge, "up"}} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %s", args, out)
	}
	e.args = []string{
		"--data-root", filepath.Join(dir, "root"), "--exec-root", filepath.Join(dir, "exec"), "--pidfile", filepath.Join(dir, "pid"),
		"-H", "unix://" + e.Sock, "-H", e.TCP, "--bridge", e.bridge, "--iptables=false", "--ip6tables=false",
		"--default-address-pool", "base=10.213.0.0/16,size=24",
		"--label", "dev.gordon.state-dir=" + e.StateDir, "--label", "dev.gordon.docker-socket=" + e.Sock}
	e.launch(t)
	t.Cleanup(func() { e.stop(t) })
	out, err := exec.Command("docker", "--config", fixture.DockerConfig(), "context", "create", e.Context, "--docker", "host="+e.TCP).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return e
}

// startEngine2InNetns starts a second engine in a network namespace of its
// own, joined to the host by a veth pair on subnet (three octets, e.g.
// "10.214.0": the host side is .1, the engine's side .2). Unlike
// startEngine2's, this engine may be restarted: a dockerd that starts with
// a stale default bridge network and --default-address-pool deletes the
// interface docker0 of its network namespace, which in the host's would be
// the shared engine's. Its API listens on tcp://<subnet>.2:2375 (the
// context's endpoint, so the CLI treats it as remote) and its containers'
// host ports are reachable at <subnet>.2 from the host.
func startEngine2InNetns(t *testing.T, subnet string) *engine2 {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "g2n-")
	require.NoError(t, err)
	id := strings.TrimPrefix(filepath.Base(dir), "g2n-")
	if len(id) > 8 {
		id = id[:8]
	}
	e := &engine2{Dir: dir, Sock: filepath.Join(dir, "d.sock"), TCP: "tcp://" + subnet + ".2:2375", StateDir: filepath.Join(dir, "state"),
		Context: "gordon-e2e-" + filepath.Base(dir), netns: "g2n" + id}
	veth := "g2v" + id
	t.Cleanup(func() { // after the daemon stopped
		_ = exec.Command("ip", "netns", "del", e.netns).Run()
		_ = exec.Command("ip", "link", "del", veth).Run()
	})
	for _, args := range [][]string{
		{"netns", "add", e.netns}, {"-n", e.netns, "link", "set", "lo", "up"},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", e.netns},
		{"addr", "add", subnet + ".1/24", "dev", veth}, {"link", "set", veth, "up"},
		{"-n", e.netns, "addr", "add", subnet + ".2/24", "dev", "eth0"}, {"-n", e.netns, "link", "set", "eth0", "up"},
	} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %s", args, out)
	}
	e.args = []string{
		"--data-root", filepath.Join(dir, "root"), "--exec-root", filepath.Join(dir, "exec"), "--pidfile", filepath.Join(dir, "pid"),
		"-H", "unix://" + e.Sock, "-H", e.TCP, "--default-address-pool", "base=10.215.0.0/16,size=24",
		"--label", "dev.gordon.state-dir=" + e.StateDir, "--label", "dev.gordon.docker-socket=" + e.Sock}
	e.launch(t)
	t.Cleanup(func() { e.stop(t) })
	out, err := exec.Command("docker", "--config", fixture.DockerConfig(), "context", "create", e.Context, "--docker", "host="+e.TCP).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return e
}

// launch starts the daemon with e.args (its log appended to
// DIR/dockerd.log) and waits until it answers on e.TCP (30 s).
func (e *engine2) launch(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(e.Dir, "dockerd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer logf.Close()
	e.cmd = exec.Command("dockerd", e.args...)
	if e.netns != "" {
		// nsenter execs dockerd: the process is the daemon itself.
		e.cmd = exec.Command("nsenter", append([]string{"--net=/var/run/netns/" + e.netns, "dockerd"}, e.args...)...)
	}
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	require.NoError(t, e.cmd.Start())
	if !assert.Eventually(t, func() bool {
		return exec.Command("docker", "-H", e.TCP, "version").Run() == nil
	}, 30*time.Second, 200*time.Millisecond) {
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("second engine did not answer on %s within 30s:\n%s", e.TCP, fixture.LastLines(string(b), 30))
	}
}

// terminate sends the daemon SIGTERM (it stops its containers, each with
// its own stop timeout) and waits for it to exit, killing it after 60 s.
func (e *engine2) terminate() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = e.cmd.Process.Kill()
		<-done
	}
}

func (e *engine2) stop(t *testing.T) {
	_ = exec.Command("docker", "--config", fixture.DockerConfig(), "context", "rm", "-f", e.Context).Run()
	if ids, _ := e.docker("ps", "-aq"); ids != "" {
		_, _ = e.docker(append([]string{"rm", "-f"}, strings.Fields(ids)...)...)
	}
	_, _ = e.docker("network", "prune", "-f")
	e.terminate()
	if t.Failed() {
		b, _ := os.ReadFile(filepath.Join(e.Dir, "dockerd.log"))
		t.Logf("second engine log:\n%s", fixture.LastLines(string(b), 20))
	}
	// The daemon leaves its default network namespace mounted.
	_ = syscall.Unmount(filepath.Join(e.Dir, "exec", "netns", "default"), syscall.MNT_DETACH)
	_ = os.RemoveAll(e.Dir)
}

// docker runs the docker CLI against the second engine.
func (e *engine2) docker(args ...string) (string, error) {
	out, err := exec.Command("docker", append([]string{"-H", e.TCP}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// managed2 lists app's containers (any state) on the second engine.
func (e *engine2) managed(t testing.TB, app string) []string {
	t.Helper()
	out, err := e.docker("ps", "-aq", "--filter", "label=dev.gordon.app="+app)
	require.NoError(t, err, out)
	return strings.Fields(out)
}

// R18 + R41 + R57 across a real engine restart: two apps on a
// second engine of their own (in its own network namespace), brought up by `system start` (the edge and
// the watcher as containers, as on a server). The daemon is stopped as a
// reboot would stop it (SIGTERM: every container stops) and started again;
// the engine's restart policies bring the edge, the watcher and both apps
// back, with addresses given out again. Under a client per host: no
// request for one app's host is ever answered by the other app, and both
// answer again within 10 s of the engine answering again (its restart
// policies start the containers before its API answers).
func TestR18_TwoAppsAcrossAnEngineRestartNeverAnswerForEachOther(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	e := startEngine2InNetns(t, "10.214.0")
	client := t.TempDir()
	// Addresses in the engine's own network namespace (all ports free).
	httpAddr, adminAddr := "10.214.0.2:18080", "127.0.0.1:18081"
	r := remote(t, e.Context, client, "system", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr)
	require.Equal(t, 0, r.Code, r.String())
	apps := map[string]string{"e2eenga": "enga.test", "e2eengb": "engb.test"}
	for app, host := range apps {
		file := filepath.Join(t.TempDir(), app+".toml")
		fixture.WriteFile(t, file, webManifest(app, v1, host, fmt.Sprintf("env = { VERSION = %q }", app)))
		r := remote(t, e.Context, client, "deploy", "-f", file, "--copy-images")
		require.Equal(t, 0, r.Code, r.String())
	}
	edge := &fixture.Edge{HTTPAddr: httpAddr}
	serving := func(host, want string) bool {
		code, body, err := edge.Get(host, "/")
		return err == nil && code == 200 && versionOf(body) == want
	}
	for app, host := range apps {
		require.True(t, serving(host, app), "%s serves %s before the restart", host, app)
	}

	results := make(chan pollTally, len(apps))
	stop := make(chan struct{})
	polls := map[string]*atomic.Int64{}
	for app, host := range apps {
		polls[app] = new(atomic.Int64)
		go func(app, host string, n *atomic.Int64) { results <- pollHost(t, edge, host, app, n, stop) }(app, host, polls[app])
	}

	began := time.Now()
	e.terminate()
	started := time.Now()
	e.launch(t)
	up := time.Now()
	t.Logf("engine stopped in %s, answering %s after its start", started.Sub(began).Round(time.Millisecond), up.Sub(started).Round(time.Millisecond))
	require.Eventually(t, func() bool { return serving("enga.test", "e2eenga") && serving("engb.test", "e2eengb") },
		10*time.Second, 50*time.Millisecond, "both apps answer within 10 s of the engine answering again")
	back := time.Since(up)
	// 20 more answers per host on the settled routes: a late wrong answer
	// still counts.
	settled := map[string]int64{}
	for app, n := range polls {
		settled[app] = n.Load()
	}
	require.Eventually(t, func() bool {
		for app, n := range polls {
			if n.Load() < settled[app]+20 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "20 more polls per host after both answered")
	close(stop)
	var wrong int
	for range apps {
		c := <-results
		wrong += c.wrong
		t.Logf("polls: %+v", c)
	}
	t.Logf("both apps answering %s after the engine answered again", back.Round(time.Millisecond))
	assert.Zero(t, wrong, "no request reached the other app")
	assert.NoError(t, exec.Command("ip", "link", "show", "docker0").Run(), "the shared engine's docker0 is still there")
}
