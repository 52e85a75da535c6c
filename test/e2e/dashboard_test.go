package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// TestDashboard_BrowserShowsAppsLiveDeployAndTraffic: in headless
// chromium, the apps page lists three deployed apps and j/Enter open one;
// on an open app page a deploy's steps show within 2 s of its claim and
// its outcome when it ends (server-sent events, no reload); the edge's
// request count moves under load; the op page shows the steps. A
// screenshot of each page is written (artifactDir). The dashboard's
// resident memory grows by less than 15 MiB over the test.
func TestDashboard_BrowserShowsAppsLiveDeployAndTraffic(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	apps := []string{"e2edasha", "e2edashb", "e2edashc"}
	a := fixture.NewApp(t, apps[0])
	files := map[string]string{}
	for _, app := range apps {
		fixture.CleanupApp(t, app)
		files[app] = filepath.Join(t.TempDir(), app+".toml")
		fixture.WriteFile(t, files[app], webManifest(app, v1, app+".test", ""))
		_, r := fixture.DeployJSON(t, a.State, files[app])
		require.Equal(t, 0, r.Code, r.String())
	}

	addr := fixture.FreeAddr(t)
	cmd, _, errb := fixture.Command(context.Background(), fixture.NormalBin(), a.State, nil, "dashboard", "--addr", addr, "--interval", "1s")
	d := startDashboard(t, cmd, errb, addr, 30*time.Second)
	base := "http://" + addr
	bctx := browser(t)

	// Apps page: the three apps; j focuses the first row, Enter opens it.
	do(t, bctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`a[data-k="app-e2edashc"]`)))
	text := value(t, bctx, chromedp.Text(chromedp.CSS("#live")))
	for _, app := range apps {
		assert.Contains(t, text, app)
	}
	rss0 := rssKiB(t, d.cmd.Process.Pid)
	screenshot(t, bctx, "apps")
	do(t, bctx, chromedp.WaitVisible(chromedp.CSS(`#conn.live`)), chromedp.KeyEvent("j"))
	focused := value(t, bctx, chromedp.Evaluate[string](`document.activeElement.getAttribute("data-k")`))
	require.Equal(t, "app-e2edasha", focused, "j focuses the first app")
	do(t, bctx, chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(`#lastop`)))
	require.Equal(t, base+"/app/e2edasha", value(t, bctx, chromedp.Location()))

	// A deploy started while the page is open: its steps, then its outcome.
	do(t, bctx, chromedp.WaitVisible(chromedp.CSS(`#conn.live`)))
	oldOp := value(t, bctx, chromedp.AttributeValue(chromedp.CSS(`#lastop`), "data-op")).Value
	fixture.WriteFile(t, files["e2edasha"], webManifest("e2edasha", v2, "e2edasha.test", ""))
	deployed := make(chan fixture.DeployOp, 1)
	go func() {
		op, r := fixture.DeployJSON(t, a.State, files["e2edasha"])
		if r.Code != 0 {
			t.Errorf("deploy v2: %s", r)
		}
		deployed <- op
	}()
	var newOp string
	var seen time.Time
	require.Eventually(t, func() bool {
		got := try(bctx, chromedp.Evaluate[lastOpView](`(() => { const s = document.querySelector("#lastop"); return {op: s ? s.dataset.op : "", steps: s ? s.querySelectorAll("tr.step").length : 0}; })()`))
		if got.Op == "" || got.Op == oldOp || got.Steps == 0 {
			return false
		}
		newOp, seen = got.Op, time.Now()
		return true
	}, 60*time.Second, 20*time.Millisecond, "the deploy's steps never showed on the open app page")
	screenshot(t, bctx, "app-deploying")
	op := <-deployed
	require.Equal(t, newOp, op.ID)
	started := opStarted(t, a, op.ID)
	t.Logf("deploy %s claimed at %s, its steps shown %s later", op.ID, started.Format(time.RFC3339Nano), seen.Sub(started))
	assert.Less(t, seen.Sub(started), 2*time.Second, "steps within 2 s of the deploy's claim")
	ended := time.Now()
	require.Eventually(t, func() bool {
		return try(bctx, chromedp.Evaluate[string](`(() => { const s = document.querySelector('#lastop[data-op="`+op.ID+`"]'); return s ? s.dataset.outcome : ""; })()`)) == "success"
	}, 10*time.Second, 20*time.Millisecond, "the outcome never showed")
	t.Logf("outcome shown %s after the deploy command returned", time.Since(ended))

	// Traffic under load: the serving generation's request count moves.
	count := func() int {
		s := try(bctx, chromedp.Evaluate[string](`(() => { const c = document.querySelector('.traffic tr[data-serving] td.req'); return c ? c.textContent : "0"; })()`))
		n, _ := strconv.Atoi(strings.TrimSpace(s))
		return n
	}
	before := count()
	for range 200 {
		code, _, err := a.Edge.Get("e2edasha.test", "/")
		require.NoError(t, err)
		require.Equal(t, 200, code)
	}
	require.Eventually(t, func() bool { return count() >= before+200 }, 10*time.Second, 100*time.Millisecond,
		"the page's request count did not move under load (before %d, now %d)", before, count())
	rps := value(t, bctx, chromedp.Text(chromedp.CSS(`.traffic tr[data-serving] td.rps`)))
	t.Logf("under load: %d requests in the last minute (was %d), %s req/s", count(), before, rps)
	require.Eventually(t, func() bool {
		return try(bctx, chromedp.Evaluate[int](`document.querySelectorAll(".access tbody tr").length`)) > 0
	}, 10*time.Second, 100*time.Millisecond, "the access log lines did not show")
	screenshot(t, bctx, "app")

	// The op page: every step of the deploy.
	do(t, bctx, chromedp.Navigate(base+"/app/e2edasha/op/"+op.ID), chromedp.WaitVisible(chromedp.CSS(`tr.step`)))
	text = value(t, bctx, chromedp.Text(chromedp.CSS("#live")))
	for _, st := range op.Steps {
		assert.Contains(t, text, st.ID)
	}
	assert.Contains(t, text, "docker gordon ops e2edasha "+op.ID)
	screenshot(t, bctx, "op")

	// Dark scheme.
	do(t, bctx, darkScheme(), chromedp.Navigate(base+"/app/e2edasha"), chromedp.WaitVisible(chromedp.CSS(`#lastop`)))
	bg := value(t, bctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	assert.Equal(t, "rgb(21, 23, 26)", bg, "the dark scheme's background")
	screenshot(t, bctx, "app-dark")

	rss1 := rssKiB(t, d.cmd.Process.Pid)
	t.Logf("dashboard VmRSS: %d KiB after the first page, %d KiB at the end (grew %d KiB)", rss0, rss1, rss1-rss0)
	assert.Less(t, rss1-rss0, 15<<10, "the running dashboard grows by less than 15 MiB")
}

// lastOpView is what the app page's last operation section shows: its
// op ID and how many step rows.
type lastOpView struct {
	Op    string `json:"op"`
	Steps int    `json:"steps"`
}

// opStarted is when op was claimed, from the journal.
func opStarted(t *testing.T, a *fixture.App, id string) time.Time {
	t.Helper()
	r := a.Gordon("ops", a.Name, id, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var op struct {
		StartedAt time.Time `json:"started_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &op))
	return op.StartedAt
}

// TestDashboard_NonLoopbackNeedsAToken: a non-loopback --addr without
// --token-file is refused and nothing listens; with one, a request
// without the token gets 401 and one with it the page.
func TestDashboard_NonLoopbackNeedsAToken(t *testing.T) {
	state := t.TempDir()
	addr := "0.0.0.0:" + strings.Split(fixture.FreeAddr(t), ":")[1]
	r := fixture.Gordon(t, state, "dashboard", "--addr", addr)
	require.Equal(t, 1, r.Code, r.String())
	assert.Contains(t, r.Stderr, "--token-file")
	assert.Contains(t, r.Stderr, "nothing was started")
	local := "127.0.0.1:" + strings.Split(addr, ":")[1]
	_, err := http.Get("http://" + local + "/")
	require.Error(t, err, "nothing listens after the refusal")

	tokenFile := filepath.Join(t.TempDir(), "token")
	const token = "e2e-dashboard-token-0123456789"
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	cmd, _, errb := fixture.Command(context.Background(), fixture.NormalBin(), state, nil, "dashboard", "--addr", addr, "--token-file", tokenFile)
	startDashboard(t, cmd, errb, local, 30*time.Second, "Authorization", "Bearer "+token)
	resp, err := http.Get("http://" + local + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// TestDashboard_RemoteContextShowsThatEnginesApps: `docker --context X
// gordon dashboard` serves here what a runner on X reads there: the
// second engine's app, with commands naming the context.
func TestDashboard_RemoteContextShowsThatEnginesApps(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	e := startEngine2(t)
	client := t.TempDir()
	app := "e2edashremote"
	fixture.CleanupApp(t, app)
	r := remote(t, e.Context, client, "edge", "start", "--http-addr", fixture.FreeAddr(t), "--admin-addr", fixture.FreeAddr(t))
	require.Equal(t, 0, r.Code, r.String())
	file := filepath.Join(t.TempDir(), "app.toml")
	fixture.WriteFile(t, file, webManifest(app, v1, "dashremote.test", ""))
	r = remote(t, e.Context, client, "deploy", "-f", file, "--copy-images")
	require.Equal(t, 0, r.Code, r.String())

	addr := fixture.FreeAddr(t)
	cmd, _, errb := remoteCmd(context.Background(), e.Context, client, "dashboard", "--addr", addr)
	startDashboard(t, cmd, errb, addr, 2*time.Minute)
	bctx := browser(t)
	do(t, bctx, chromedp.Navigate("http://"+addr+"/"), chromedp.WaitVisible(chromedp.CSS(`a[data-k="app-`+app+`"]`)))
	text := value(t, bctx, chromedp.Text(chromedp.CSS("body")))
	assert.Contains(t, text, "docker --context "+e.Context+" gordon")
	assert.Contains(t, text, "engine: "+e.Context)
	screenshot(t, bctx, "remote-apps")
	do(t, bctx, chromedp.Navigate("http://"+addr+"/app/"+app), chromedp.WaitVisible(chromedp.CSS(`#lastop`)))
	text = value(t, bctx, chromedp.Text(chromedp.CSS("#live")))
	assert.Contains(t, text, "running")
	screenshot(t, bctx, "remote-app")
	assert.NotEmpty(t, e.managed(t, app), "the app runs on the second engine")
}

// TestDashboard_SystemStartServesItFromReconcile: system start --dashboard
// refuses a non-loopback address and changes nothing; with a loopback one,
// gordon-reconcile serves the dashboard there on the engine's host.
func TestDashboard_SystemStartServesItFromReconcile(t *testing.T) {
	state := t.TempDir()
	httpAddr, adminAddr, dash := fixture.FreeAddr(t), fixture.FreeAddr(t), fixture.FreeAddr(t)
	t.Cleanup(func() {
		if r := fixture.GordonPath(t, state, fixture.BinDir(), "system", "stop"); r.Code != 0 {
			t.Logf("system stop: %s", r)
		}
	})
	r := fixture.GordonPath(t, state, fixture.BinDir(), "system", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr, "--dashboard=0.0.0.0:9190")
	require.Equal(t, 1, r.Code, r.String())
	assert.Contains(t, r.Stderr, "loopback")
	assert.NotContains(t, r.Stdout+r.Stderr, "gordon-edge: started", "nothing was started")

	r = fixture.GordonPath(t, state, fixture.BinDir(), "system", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr, "--dashboard="+dash)
	require.Equal(t, 0, r.Code, r.String())
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + dash + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "gordon-reconcile does not serve the dashboard on %s", dash)
}
