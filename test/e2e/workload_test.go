package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// inspectJSON runs `docker inspect` on id and decodes its first element.
func inspectJSON(t testing.TB, id string) map[string]any {
	t.Helper()
	out, err := exec.Command("docker", "inspect", id).Output()
	require.NoError(t, err)
	var v []map[string]any
	require.NoError(t, json.Unmarshal(out, &v))
	require.Len(t, v, 1)
	return v[0]
}

// field walks a decoded JSON document along keys.
func field(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// tcpLine dials addr and reads one line.
func tcpLine(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	return bufio.NewReader(c).ReadString('\n')
}

// runningCount counts the running containers of app/service (docker ps).
func runningCount(app, service string) (int, error) {
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=dev.gordon.app="+app, "--filter", "label=dev.gordon.service="+service).Output()
	return len(strings.Fields(string(out))), err
}

func voldbManifest(app, image, publish, env string, mapped bool) string {
	m := fmt.Sprintf(`name = %q
[services.db]
image = %q
stop_grace = "5s"
[services.db.env]
GEN = %q
[[services.db.tcp]]
port = 5432
publish = %q
`, app, image, env, publish)
	if mapped {
		m += `[[services.db.volume]]
name = "pgdata"
path = "/data"
`
	}
	return m
}

func TestImageVolume_UnmappedVolumeIsRefusedWithThePathAndNothingChanges(t *testing.T) {
	img := testimages.Require(t, "", "voldb")["voldb"]
	a := fixture.NewApp(t, "e2eunmapped")
	state, app, file := a.State, a.Name, a.File
	fixture.WriteFile(t, file, voldbManifest(app, img, fixture.FreeAddr(t), "1", false))
	want := "[[services.db.volume]]\nname = \"data\"\npath = \"/data\"\n"

	r := fixture.Gordon(t, state, "validate", "-f", file)
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, "declares VOLUME /data")
	require.Contains(t, r.Stderr, want, "the exact lines to add")

	r = fixture.Gordon(t, state, "deploy", "-f", file, "--dry-run")
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, "declares VOLUME /data")

	r = fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, want)
	require.Empty(t, fixture.Managed(t, app, ""), "no container was created")
	out, err := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=dev.gordon.app="+app).Output()
	require.NoError(t, err)
	require.Empty(t, strings.TrimSpace(string(out)), "no volume was created")
	out, err = exec.Command("docker", "network", "ls", "-q", "--filter", "label=dev.gordon.app="+app).Output()
	require.NoError(t, err)
	require.Empty(t, strings.TrimSpace(string(out)), "no network was created")
	r = fixture.Gordon(t, state, "status", app)
	require.NotEqual(t, 0, r.Code, "no revision was stored: %s", r.String())
}

func TestImageVolume_MappedVolumeNeverRunsTwoGenerationsAndKeepsItsData(t *testing.T) {
	img := testimages.Require(t, "", "voldb")["voldb"]
	a := fixture.NewApp(t, "e2emapped")
	state, app := a.State, a.Name
	publish := fixture.FreeAddr(t)
	file := a.File

	// Poll docker ps every 50 ms through every deploy.
	var mu sync.Mutex
	maxRunning, polls := 0, 0
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if n, err := runningCount(app, "db"); err == nil {
				mu.Lock()
				polls++
				if n > maxRunning {
					maxRunning = n
				}
				mu.Unlock()
			}
			// The sampling period of a watcher that runs beside the
			// deploys, not a wait for a condition.
			time.Sleep(50 * time.Millisecond)
		}
	}()
	lastCount := 0
	for i := 1; i <= 3; i++ {
		fixture.WriteFile(t, file, voldbManifest(app, img, publish, fmt.Sprint(i), true))
		op, r := fixture.DeployJSON(t, state, file)
		require.Equal(t, 0, r.Code, "deploy %d: %s", i, r.String())
		require.Equal(t, "success", op.Outcome)
		// Implicit TCP readiness (R29): ready means accepting, at once.
		line, err := tcpLine(publish)
		require.NoError(t, err, "deploy %d: the service accepts right after the deploy", i)
		var count int
		_, err = fmt.Sscanf(line[strings.Index(line, "count="):], "count=%d", &count)
		require.NoError(t, err, line)
		require.Greater(t, count, lastCount, "deploy %d: the counter in /data survives the generation", i)
		lastCount = count
	}
	cancel()
	wg.Wait()
	t.Logf("docker ps polled %d times, at most %d running", polls, maxRunning)
	require.Greater(t, polls, 20)
	require.Equal(t, 1, maxRunning, "two generations of a service with an image VOLUME never run together")

	ids := fixture.Managed(t, app, "db")
	require.Len(t, ids, 1)
	ins := inspectJSON(t, ids[0])
	for _, m := range field(ins, "Mounts").([]any) {
		require.Equal(t, "volume", field(m, "Type"))
		require.Equal(t, "gordon-"+app+"-pgdata", field(m, "Name"), "no anonymous volume")
	}
	require.Equal(t, "SIGQUIT", field(ins, "Config", "StopSignal"), "the image's STOPSIGNAL by default (R25)")
	require.Equal(t, "unless-stopped", field(ins, "HostConfig", "RestartPolicy", "Name"))
	require.Equal(t, "json-file", field(ins, "HostConfig", "LogConfig", "Type"))
	require.Equal(t, map[string]any{"max-size": "10m", "max-file": "3"}, field(ins, "HostConfig", "LogConfig", "Config"))
}

func sigdManifest(app, image, host, signal, env string) string {
	m := fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "6s"
%s
[services.web.env]
EXIT_ON = "SIGINT"
GEN = %q
[[services.web.http]]
port = 8080
host = %q
`, app, image, signal, env, host)
	return m
}

func TestStopSignal_EachGenerationIsStoppedWithItsOwnSignal(t *testing.T) {
	img := testimages.Require(t, "", "sigd")["sigd"]
	a := fixture.NewApp(t, "e2esignal")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File
	deploy := func(signal, gen string) time.Duration {
		t.Helper()
		fixture.WriteFile(t, file, sigdManifest(app, img, "signal.test", signal, gen))
		op, r := fixture.DeployJSON(t, state, file)
		require.Equal(t, 0, r.Code, r.String())
		require.Equal(t, "success", op.Outcome)
		code, _, err := edge.Get("signal.test", "/")
		require.NoError(t, err)
		require.Equal(t, 200, code)
		return r.Elapsed
	}
	// The app exits only on SIGINT.
	deploy(`stop_signal = "SIGINT"`, "1")
	ids := fixture.Managed(t, app, "web")
	require.Len(t, ids, 1)
	require.Equal(t, "SIGINT", field(inspectJSON(t, ids[0]), "Config", "StopSignal"))
	// Generation 2 has no stop_signal (SIGTERM, ignored by the app); it
	// supersedes generation 1, which gets its own SIGINT: retired at once.
	fast := deploy("", "2")
	// Generation 3 supersedes generation 2, whose SIGTERM is ignored: it is
	// killed only after its 6 s grace.
	slow := deploy(`stop_signal = "SIGINT"`, "3")
	t.Logf("retiring a SIGINT generation: deploy %s; a SIGTERM one: deploy %s", fast, slow)
	require.Less(t, fast, 5*time.Second, "the SIGINT generation retires at once")
	require.GreaterOrEqual(t, slow, 6*time.Second, "the SIGTERM generation is killed only after its grace")
}

func TestHealthcheck_AlwaysUnhealthyImageFailsTheDeployAndTheOldGenerationKeepsServing(t *testing.T) {
	img := testimages.Require(t, "", "sigd")["sigd"]
	a := fixture.NewApp(t, "e2eunhealthy")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File
	manifest := func(env string) string {
		return fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "2s"
[services.web.env]
EXIT_ON = "SIGTERM"
%s
[[services.web.http]]
port = 8080
host = "unhealthy.test"
`, app, img, env)
	}
	a.MustDeploy(manifest(""))
	before := fixture.Managed(t, app, "web")
	require.Len(t, before, 1)
	require.Equal(t, "healthy", field(inspectJSON(t, before[0]), "State", "Health", "Status"), "implicit docker readiness waited for healthy")
	_, body, err := edge.Get("unhealthy.test", "/")
	require.NoError(t, err)
	oldInstance := instanceOf([]byte(body))

	// The image's HEALTHCHECK now always fails.
	fixture.WriteFile(t, file, manifest(`HEALTH = "fail"`))
	t0 := time.Now()
	op, r := fixture.DeployJSON(t, state, file)
	require.Equal(t, 1, r.Code, r.String())
	require.Equal(t, "failed", op.Outcome)
	require.Less(t, time.Since(t0), 25*time.Second, "fails on unhealthy, not after the 30 s budget")
	require.Contains(t, r.Stdout+r.Stderr, "became unhealthy")
	require.Contains(t, r.Stdout+r.Stderr, "unhealthy on purpose", "the last health log output is in the report")
	code, body, err := edge.Get("unhealthy.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.Equal(t, oldInstance, instanceOf([]byte(body)), "the old generation keeps serving")
	require.Equal(t, before, fixture.Managed(t, app, "web"), "the failed candidate is gone")
}

func TestContainerKeys_AreVisibleInDockerInspect(t *testing.T) {
	img := testimages.Require(t, "", "sigd")["sigd"]
	a := fixture.NewApp(t, "e2ekeys")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File
	fixture.WriteFile(t, file, fmt.Sprintf(`name = %q
[services.web]
image = %q
entrypoint = ["/sigd"]
command = ["serve", "--flag"]
user = "1000:1000"
working_dir = "/tmp"
init = true
read_only = true
shm_size = "32m"
tmpfs = ["/run", "/scratch:size=8m,mode=1777"]
ulimits = { nofile = { soft = 1024, hard = 4096 }, nproc = 256 }
cap_add = ["NET_BIND_SERVICE"]
cap_drop = ["ALL"]
extra_hosts = ["metrics.internal:10.1.2.3"]
stop_signal = "SIGTERM"
[services.web.sysctls]
net.core.somaxconn = 511
[services.web.labels]
"com.example.team" = "web"
[services.web.resources]
memory = "64m"
cpus = 0.5
pids = 64
[services.web.logging]
driver = "json-file"
options = { max-size = "5m", max-file = 2 }
[services.web.healthcheck]
test = ["CMD", "/sigd", "health"]
interval = "500ms"
retries = 3
start_period = "1s"
[[services.web.http]]
port = 8080
host = "keys.test"
`, app, img))
	_, r := fixture.DeployJSON(t, state, file)
	require.Equal(t, 0, r.Code, r.String())
	_, body, err := edge.Get("keys.test", "/")
	require.NoError(t, err)
	require.Contains(t, body, "args=serve,--flag", "command replaces CMD, entrypoint runs")
	ids := fixture.Managed(t, app, "web")
	require.Len(t, ids, 1)
	ins := inspectJSON(t, ids[0])
	cfg := func(k ...string) any { return field(ins, append([]string{"Config"}, k...)...) }
	host := func(k ...string) any { return field(ins, append([]string{"HostConfig"}, k...)...) }
	require.Equal(t, []any{"/sigd"}, cfg("Entrypoint"))
	require.Equal(t, []any{"serve", "--flag"}, cfg("Cmd"))
	require.Equal(t, "1000:1000", cfg("User"))
	require.Equal(t, "/tmp", cfg("WorkingDir"))
	require.Equal(t, "SIGTERM", cfg("StopSignal"))
	require.Equal(t, "web", field(cfg("Labels"), "com.example.team"))
	require.Equal(t, []any{"CMD", "/sigd", "health"}, cfg("Healthcheck", "Test"))
	require.Equal(t, float64(500*time.Millisecond), cfg("Healthcheck", "Interval"))
	require.Equal(t, float64(3), cfg("Healthcheck", "Retries"))
	require.Equal(t, float64(time.Second), cfg("Healthcheck", "StartPeriod"))
	require.Equal(t, true, host("Init"))
	require.Equal(t, true, host("ReadonlyRootfs"))
	require.Equal(t, float64(32<<20), host("ShmSize"))
	require.Equal(t, map[string]any{"/run": "", "/scratch": "size=8m,mode=1777"}, host("Tmpfs"))
	require.ElementsMatch(t, []any{
		map[string]any{"Name": "nofile", "Soft": float64(1024), "Hard": float64(4096)},
		map[string]any{"Name": "nproc", "Soft": float64(256), "Hard": float64(256)},
	}, host("Ulimits"))
	require.Contains(t, fmt.Sprint(host("CapAdd")), "NET_BIND_SERVICE")
	require.Contains(t, fmt.Sprint(host("CapDrop")), "ALL")
	require.Equal(t, []any{"metrics.internal:10.1.2.3"}, host("ExtraHosts"))
	require.Equal(t, map[string]any{"net.core.somaxconn": "511"}, host("Sysctls"))
	require.Equal(t, float64(64<<20), host("Memory"))
	require.Equal(t, float64(5e8), host("NanoCpus"))
	require.Equal(t, float64(64), host("PidsLimit"))
	require.Equal(t, "json-file", host("LogConfig", "Type"))
	require.Equal(t, map[string]any{"max-size": "5m", "max-file": "2"}, host("LogConfig", "Config"))
	require.Equal(t, "unless-stopped", host("RestartPolicy", "Name"))
}

func TestDependsOn_DbIsCreatedAndReadyBeforeApi(t *testing.T) {
	imgs := testimages.Require(t, "", "voldb", "sigd")
	a := fixture.NewApp(t, "e2edeps")
	state, app, file := a.State, a.Name, a.File
	// "api" sorts before "db": only depends_on puts db first.
	fixture.WriteFile(t, file, fmt.Sprintf(`name = %q
[services.api]
image = %q
depends_on = ["db"]
stop_grace = "2s"
[[services.api.http]]
port = 8080
host = "deps.test"
[services.db]
image = %q
stop_grace = "2s"
[[services.db.tcp]]
port = 5432
publish = %q
[[services.db.volume]]
name = "pgdata"
path = "/data"
`, app, imgs["sigd"], imgs["voldb"], fixture.FreeAddr(t)))
	events := fixture.WatchEvents(t, app)
	_, r := fixture.DeployJSON(t, state, file)
	require.Equal(t, 0, r.Code, r.String())
	var order []string // Stop lets the last events arrive
	for _, ev := range events.Stop() {
		if ev.Status == "create" {
			order = append(order, ev.Actor.Attributes["dev.gordon.service"])
		}
	}
	require.Equal(t, []string{"db", "api"}, order, "db is created before api")
}

func TestRestartPolicy_ACrashedGenerationComesBackWithoutReconcile(t *testing.T) {
	img := testimages.Require(t, "", "sigd")["sigd"]
	a := fixture.NewApp(t, "e2ecrash")
	state, app, edge := a.State, a.Name, a.Edge
	a.MustDeploy(sigdManifest(app, img, "crash.test", `stop_signal = "SIGINT"`, "1"))
	ids := fixture.Managed(t, app, "web")
	require.Len(t, ids, 1)
	_, _, _ = edge.Get("crash.test", "/crash")
	assert.Eventually(t, func() bool {
		ins := inspectJSON(t, ids[0])
		return field(ins, "RestartCount").(float64) >= 1 && field(ins, "State", "Running") == true
	}, 15*time.Second, 100*time.Millisecond)
	ins := inspectJSON(t, ids[0])
	require.GreaterOrEqual(t, field(ins, "RestartCount").(float64), float64(1), "Docker restarted the crashed generation")
	require.Equal(t, true, field(ins, "State", "Running"))

	// A stopped app's container stays stopped.
	r := fixture.Gordon(t, state, "stop", app)
	require.Equal(t, 0, r.Code, r.String())
	// The behaviour under test is the passage of time: a restart policy
	// would revive the stopped container within this window.
	time.Sleep(1500 * time.Millisecond)
	n, err := runningCount(app, "web")
	require.NoError(t, err)
	require.Zero(t, n, "a stopped app's generation is never revived")
}

// The restart policy across an engine restart: the serving generation is
// back before any reconcile pass; a superseded generation and a stopped
// app's container are not revived. It restarts dockerd, so it runs only in
// CI (CI=true) or with GORDON_E2E_RESTART_ENGINE=1, and only when dockerd
// is a plain process this machine started (not a systemd unit).
func TestRestartPolicy_EngineRestartRevivesOnlyServingGenerations(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("GORDON_E2E_RESTART_ENGINE") != "1" {
		t.Skip("restarts dockerd: set GORDON_E2E_RESTART_ENGINE=1 (CI sets CI=true)")
	}
	if exec.Command("systemctl", "is-active", "--quiet", "docker").Run() == nil {
		t.Skip("dockerd is a systemd unit here; not restarting it from a test")
	}
	imgs := testimages.Require(t, "", "sigd", "voldb")
	state := t.TempDir()
	fixture.StartEdge(t, state)
	serving, stopped := "e2erpserve", "e2erpstop"
	fixture.CleanupApp(t, serving)
	fixture.CleanupApp(t, stopped)
	file := filepath.Join(t.TempDir(), "serve.toml")
	fixture.WriteFile(t, file, sigdManifest(serving, imgs["sigd"], "rp.test", `stop_signal = "SIGINT"`, "1"))
	r := fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	fixture.WriteFile(t, file, sigdManifest(serving, imgs["sigd"], "rp.test", `stop_signal = "SIGINT"`, "2"))
	r = fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	gen2 := fixture.Managed(t, serving, "web")
	require.Len(t, gen2, 1)
	sfile := filepath.Join(t.TempDir(), "stop.toml")
	fixture.WriteFile(t, sfile, voldbManifest(stopped, imgs["voldb"], fixture.FreeAddr(t), "1", true))
	r = fixture.Gordon(t, state, "deploy", "-f", sfile)
	require.Equal(t, 0, r.Code, r.String())
	r = fixture.Gordon(t, state, "stop", stopped)
	require.Equal(t, 0, r.Code, r.String())

	restartDockerd(t)
	assert.Eventually(t, func() bool { n, _ := runningCount(serving, "web"); return n == 1 }, 20*time.Second, 200*time.Millisecond)
	require.Equal(t, gen2, fixture.Managed(t, serving, "web"), "only the serving generation exists")
	n, err := runningCount(serving, "web")
	require.NoError(t, err)
	require.Equal(t, 1, n, "the serving generation is back without any reconcile pass")
	n, err = runningCount(stopped, "db")
	require.NoError(t, err)
	require.Zero(t, n, "the stopped app stays stopped across the engine restart")
}

func TestInternalReadiness_AnInternalOnlyProbeDeploysThroughTheHelper(t *testing.T) {
	img := testimages.Require(t, "", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2einternal")
	state, app, file := a.State, a.Name, a.File
	manifest := func(env string) string {
		return fmt.Sprintf(`name = %q
[services.api]
image = %q
stop_grace = "2s"
[services.api.env]
READY_AFTER = "1s"
%s
[[services.api.http]]
port = 8080
[services.api.readiness]
type = "http"
path = "/healthz"
port = 8080
timeout = "8s"
`, app, img, env)
	}
	op, r := a.Deploy(manifest(""))
	require.Equal(t, 0, r.Code, r.String())
	require.Equal(t, "success", op.Outcome)
	ids := fixture.Managed(t, app, "api")
	require.Len(t, ids, 1, "the helper container is gone, only the service remains")
	t.Logf("first deploy with an internal-only probe: %s", r.Elapsed)
	require.Empty(t, field(inspectJSON(t, ids[0]), "HostConfig", "PortBindings"), "the internal port is never published")

	// A never-ready candidate fails through the same helper; the old one stays.
	fixture.WriteFile(t, file, manifest(`NEVER_READY = "true"`))
	_, r = fixture.DeployJSON(t, state, file)
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stdout+r.Stderr, "HTTP readiness timeout after 8s")
	require.Equal(t, ids, fixture.Managed(t, app, "api"))
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.gordon.role=probe-helper", "--filter", "label=dev.gordon.app="+app).Output()
	require.NoError(t, err)
	require.Empty(t, strings.TrimSpace(string(out)), "no helper container is left behind")
}

func TestR41_UnhealthyServingContainerIsRecoveredAndJournaled(t *testing.T) {
	img := testimages.Require(t, "", "sigd")["sigd"]
	a := fixture.NewApp(t, "e2esick")
	state, app, edge := a.State, a.Name, a.Edge
	a.MustDeploy(sigdManifest(app, img, "sick.test", `stop_signal = "SIGINT"`, "1"))
	ids := fixture.Managed(t, app, "web")
	require.Len(t, ids, 1)
	_, before, err := edge.Get("sick.test", "/")
	require.NoError(t, err)

	code, _, err := edge.Get("sick.test", "/sick")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	assert.Eventually(t, func() bool { return field(inspectJSON(t, ids[0]), "State", "Health", "Status") == "unhealthy" }, 20*time.Second, 200*time.Millisecond)
	require.Equal(t, "unhealthy", field(inspectJSON(t, ids[0]), "State", "Health", "Status"))

	r := fixture.Gordon(t, state, "reconcile", app)
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stdout, "recovered web: unhealthy", r.String())
	r = fixture.Gordon(t, state, "status", app)
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stdout, "web: recovered "+short(ids[0]), r.String())
	require.Contains(t, r.Stdout, "unhealthy: unhealthy: /healthz answered 503", r.String())

	code, after, err := edge.Get("sick.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, "served again after the restart")
	require.NotEqual(t, instanceOf([]byte(before)), instanceOf([]byte(after)), "a new execution of the same container")
	require.Equal(t, ids, fixture.Managed(t, app, "web"))
}
