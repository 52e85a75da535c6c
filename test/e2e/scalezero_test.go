package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// startWatcher runs `reconcile --watch` (the watcher that puts idle
// services to sleep and wakes them) with extra arguments for the app's
// state directory until the test ends or the returned stop is called.
func startWatcher(t *testing.T, a *fixture.App, extra ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	watch, wso, wse := fixture.Command(ctx, fixture.NormalBin(), a.State, nil, append([]string{"reconcile", "--watch", "--interval", "1h"}, extra...)...)
	require.NoError(t, watch.Start())
	stop = sync.OnceFunc(func() {
		cancel()
		_ = watch.Wait()
		if t.Failed() {
			t.Logf("watcher stdout:\n%s\nstderr:\n%s", fixture.LastLines(wso.String(), 20), fixture.LastLines(wse.String(), 30))
		}
	})
	t.Cleanup(stop)
	require.Eventually(t, func() bool { return strings.Contains(wso.String(), a.Name) }, 60*time.Second, 100*time.Millisecond, "the watcher's first pass")
	return stop
}

// opKinds counts the app's journaled ops by kind.
func opKinds(t *testing.T, a *fixture.App) map[string]int {
	t.Helper()
	r := fixture.RunCLI(t, fixture.NormalBin(), a.State, nil, "ops", a.Name, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var ops []opJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &ops), r.String())
	out := map[string]int{}
	for _, op := range ops {
		out[op.Kind]++
	}
	return out
}

func awaitAsleep(t *testing.T, a *fixture.App, service string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return len(fixture.Running(a.Name, service)) == 0 }, within, 100*time.Millisecond, "no container of %s runs", service)
	require.Eventually(t, func() bool { return strings.Contains(a.Gordon("status", a.Name).Stdout, "asleep since") }, 10*time.Second, 100*time.Millisecond)
}

// R81 (scale to zero): a service with sleep_after = "6s" is kept awake by
// requests every 2 s; 6 s idle, no container runs and status says asleep
// since; the edge's /healthz and an unknown host do not wake it; 20
// concurrent first requests all get 200, from one wake.
func TestR81_SleepAfterIdleAndOneWakeFor20FirstRequests(t *testing.T) {
	img := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2esleep")
	a.MustDeploy(webManifest(a.Name, img, "sleep.test", `sleep_after = "6s"`))
	startWatcher(t, a)

	var idleFrom time.Time
	for i := range 6 { // 12 s of a request every 2 s: never 6 s idle
		code, body, err := a.Edge.Get("sleep.test", "/")
		idleFrom = time.Now()
		require.NoError(t, err)
		require.Equal(t, 200, code, body)
		require.NotEmpty(t, fixture.Running(a.Name, "web"), "awake after %d requests 2 s apart", i+1)
		time.Sleep(2 * time.Second) // the client's pace, not a wait for a condition
	}
	awaitAsleep(t, a, "web", 30*time.Second)
	t.Logf("asleep %s after the last request (sleep_after 6s)", time.Since(idleFrom).Round(100*time.Millisecond))

	resp, err := http.Get("http://" + edgeAdminAddr(t, a.State) + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "the edge's own health")
	code, _, err := a.Edge.Get("unknown.test", "/")
	require.NoError(t, err)
	require.Equal(t, 404, code, "an unknown host is not routed")
	assert.Never(t, func() bool { return len(fixture.Running(a.Name, "web")) > 0 }, 2*time.Second, 100*time.Millisecond,
		"the edge's /healthz and an unknown host do not wake it")
	require.Zero(t, opKinds(t, a)["wake"])

	var wg sync.WaitGroup
	codes := make([]int, 20)
	took := make([]time.Duration, 20)
	for i := range 20 {
		wg.Go(func() {
			t0 := time.Now()
			codes[i], _, _ = a.Edge.Get("sleep.test", "/")
			took[i] = time.Since(t0)
		})
	}
	wg.Wait()
	for i, c := range codes {
		assert.Equal(t, 200, c, "first request %d", i)
	}
	t.Logf("20 concurrent first requests: slowest %s", maxDuration(took))
	assert.Equal(t, 1, opKinds(t, a)["wake"], "one wake for 20 first requests")
	assert.Contains(t, a.Gordon("ops", a.Name).Stdout, "wake")
}

// edgeAdminAddr is the admin address the edge serving stateDir reports
// in its status file.
func edgeAdminAddr(t *testing.T, stateDir string) string {
	t.Helper()
	var st routetable.Status
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(stateDir, "edge", edgestate.StatusFile))
		return err == nil && json.Unmarshal(b, &st) == nil && st.AdminAddr != ""
	}, 10*time.Second, 100*time.Millisecond, "the edge reports its admin address")
	return st.AdminAddr
}

func maxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// R81 (TCP wake): a connection to a sleeping TCP service's published port
// is held while the service wakes, then relayed with what it sent.
func TestR81_TCPServiceWakesOnAConnection(t *testing.T) {
	img := testimages.Require(t, "v1", "tcpecho")["tcpecho"]
	a := fixture.NewApp(t, "e2esleeptcp")
	publish := fixture.FreeAddr(t)
	a.MustDeploy(fmt.Sprintf(`name = %q
[services.echo]
image = %q
stop_grace = "3s"
sleep_after = "6s"
[[services.echo.tcp]]
port = 9000
publish = %q
`, a.Name, img, publish))
	startWatcher(t, a)
	awaitAsleep(t, a, "echo", 40*time.Second)

	c, err := net.DialTimeout("tcp", publish, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(60*time.Second)))
	t0 := time.Now()
	_, err = fmt.Fprintf(c, "hello\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, line, "hello")
	t.Logf("TCP wake: first answer after %s", time.Since(t0).Round(time.Millisecond))
	assert.Equal(t, 1, opKinds(t, a)["wake"])
}

// R81 (cycles): 50 sleep/wake cycles (`docker gordon sleep`, then a
// burst of requests wakes it) under a bursty client: 0 failed requests.
func TestR81_FiftySleepWakeCyclesUnderABurstyClientLoseNothing(t *testing.T) {
	img := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2esleepcycle")
	a.MustDeploy(webManifest(a.Name, img, "cycle.test", `sleep_after = "1h"`))
	startWatcher(t, a)
	cycles := 50
	if testing.Short() {
		cycles = 5
	}
	failed, answered := 0, 0
	var wakes []time.Duration
	for i := range cycles {
		r := a.Gordon("sleep", a.Name)
		require.Equal(t, 0, r.Code, "cycle %d: %s", i, r.String())
		require.Empty(t, fixture.Running(a.Name, "web"), "cycle %d: asleep", i)
		var wg sync.WaitGroup
		var mu sync.Mutex
		t0 := time.Now()
		for range 5 { // the burst
			wg.Go(func() {
				code, _, err := a.Edge.Get("cycle.test", "/")
				mu.Lock()
				defer mu.Unlock()
				if err != nil || code != 200 {
					failed++
					t.Logf("cycle %d: %d %v", i, code, err)
				}
				answered++
			})
		}
		wg.Wait()
		wakes = append(wakes, time.Since(t0))
	}
	t.Logf("%d cycles, %d requests, %d failed; wake (burst answered) min %s max %s", cycles, answered, failed, minDuration(wakes), maxDuration(wakes))
	require.Zero(t, failed)
	k := opKinds(t, a)
	assert.Equal(t, cycles, k["sleep"])
	assert.Equal(t, cycles, k["wake"])
}

func minDuration(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}

// R81 (engine restart): on an engine of its own (in its own network
// namespace, brought up by `system start`: the edge and the watcher as
// containers, as on a server), a sleeping service stays asleep when the
// daemon stops as a reboot stops it and starts again (the watcher's boot
// reconciliation included), and the first request after it wakes it.
func TestR81_EngineRestartKeepsItAsleepThenARequestWakesIt(t *testing.T) {
	img := testimages.Require(t, "v1", "httpd")["httpd"]
	e := startEngine2InNetns(t, "10.218.0")
	client := t.TempDir()
	httpAddr, adminAddr := "10.218.0.2:18080", "127.0.0.1:18081"
	r := remote(t, e.Context, client, "system", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr)
	require.Equal(t, 0, r.Code, r.String())
	const app = "e2esleepboot"
	file := filepath.Join(t.TempDir(), app+".toml")
	fixture.WriteFile(t, file, webManifest(app, img, "sleepboot.test", `sleep_after = "6s"`))
	r = remote(t, e.Context, client, "deploy", "-f", file, "--copy-images")
	require.Equal(t, 0, r.Code, r.String())
	running := func() bool {
		out, err := e.docker("ps", "-q", "--filter", "label=dev.gordon.app="+app)
		return err == nil && out != ""
	}
	asleep := func() bool {
		return strings.Contains(remote(t, e.Context, client, "status", app).Stdout, "asleep since")
	}
	require.Eventually(t, func() bool { return !running() }, 60*time.Second, 200*time.Millisecond, "no container of %s runs", app)
	require.Eventually(t, asleep, 20*time.Second, 200*time.Millisecond, "status says asleep since")

	e.terminate()
	e.launch(t)
	edge := &fixture.Edge{HTTPAddr: httpAddr}
	require.Eventually(t, func() bool {
		code, _, err := edge.Get("unknown.test", "/")
		return err == nil && code == 404
	}, 60*time.Second, 200*time.Millisecond, "the edge answers again after the engine's restart")
	assert.Never(t, running, 5*time.Second, 200*time.Millisecond, "the engine's restart and the watcher's boot leave it asleep")
	require.True(t, asleep(), "status still says asleep since")

	t0 := time.Now()
	code, body, err := edge.Get("sleepboot.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	t.Logf("after the engine's restart, the first request answered in %s", time.Since(t0).Round(time.Millisecond))
	r = remote(t, e.Context, client, "ops", app, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var ops []opJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &ops), r.String())
	wakes := 0
	for _, op := range ops {
		if op.Kind == "wake" {
			wakes++
		}
	}
	assert.Equal(t, 1, wakes, "the request woke it, once")
}
