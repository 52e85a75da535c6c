package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/loadgen"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// The kill matrix (SPEC R45–R48, R58, R5): one app with an overlap service
// (web, stateless HTTP) and a single-writer service (kv, a volume), both
// behind the edge under load. Four flows — an overlap deploy of web, a
// sequential deploy of kv, a restart of the app and a remove — are each
// killed with kill -9 right after every one of their journal boundaries in
// turn, from the op's claim on (the gordonfault build; a candidate's
// creation counts as one). After
// each kill one `docker gordon reconcile` must leave:
//   - exactly one generation per service, running, the one ACTIVE names,
//     answering through the edge as it answers on its own bind;
//   - no container labelled for the app that no record owns;
//   - no marker, and a terminal latest op;
//   - under load, no failed request on web (overlap) and none on kv
//     (single-writer: its requests are held between generations, R58).
//
// A killed remove must leave nothing unowned, and the next remove must
// finish it. The matrix (flow × boundary → pass/fail) is logged.

const (
	kmWebHost = "web.km.test"
	kmKVHost  = "kv.km.test"
)

// kmManifest is the matrix app: web (overlap) and kv (volume, sequential).
func kmManifest(app, web, kv string) string {
	return fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "10s"
[[services.web.http]]
port = 8080
host = %q
[services.web.readiness]
type = "http"
path = "/healthz"
timeout = "20s"
[services.kv]
image = %q
stop_grace = "3s"
[[services.kv.http]]
port = 8080
host = %q
[[services.kv.volume]]
name = "data"
path = "/data"
[services.kv.readiness]
type = "log"
pattern = "ready"
timeout = "20s"
`, app, web, kmWebHost, kv, kmKVHost)
}

// kmRow is one cell of the matrix.
type kmRow struct {
	flow, boundary string
	pass           bool
	// webFailed, kvFailed: failed requests from the kill to the checks' end.
	webFailed, kvFailed int64
}

// kmRun is the matrix's shared state: one app, one edge, the load.
type kmRun struct {
	t               *testing.T
	a               *fixture.App
	web1, web2      string
	kv1, kv2        string
	curWeb, curKV   string
	webLoad, kvLoad *loadgen.HTTPRun
	rows            []kmRow
}

func TestKillMatrix_EveryBoundaryOfDeployRestartRemoveConverges(t *testing.T) {
	web := testimages.Require(t, "v1", "httpd")["httpd"]
	web2 := testimages.Require(t, "v2", "httpd")["httpd"]
	kv := testimages.Require(t, "v1", "kv")["kv"]
	kv2 := testimages.Require(t, "v2", "kv")["kv"]
	m := &kmRun{t: t, a: fixture.NewApp(t, "e2ekm"), web1: web, web2: web2, kv1: kv, kv2: kv2, curWeb: web, curKV: kv}
	m.a.MustDeploy(kmManifest(m.a.Name, web, kv))
	require.NoError(t, m.a.Edge.Put(kmKVHost, "/k/greeting", "hello"))
	m.check(t)

	m.webLoad = fixture.StartLoad(t, "http://"+m.a.Edge.HTTPAddr+"/", kmWebHost, 4, nil)
	m.kvLoad = fixture.StartLoad(t, "http://"+m.a.Edge.HTTPAddr+"/k/greeting", kmKVHost, 4, nil)

	m.flow("overlap-deploy", true, func() []string {
		m.reset()
		m.a.Write(kmManifest(m.a.Name, otherImage(m.curWeb, m.web1, m.web2), m.curKV))
		return []string{"deploy", "-f", m.a.File}
	}, m.afterDeploy)
	m.flow("sequential-deploy", true, func() []string {
		m.reset()
		m.a.Write(kmManifest(m.a.Name, m.curWeb, otherImage(m.curKV, m.kv1, m.kv2)))
		return []string{"deploy", "-f", m.a.File}
	}, m.afterDeploy)
	m.flow("restart", true, func() []string {
		m.reset()
		return []string{"restart", m.a.Name}
	}, m.afterDeploy)
	ws, ks := m.webLoad.Stop(), m.kvLoad.Stop()
	t.Logf("load over the deploy and restart flows: web %s; kv %s", ws, ks)
	m.flow("remove", false, m.redeployForRemove, m.afterRemove)

	var b strings.Builder
	fmt.Fprintf(&b, "kill matrix (%d cells):\n%-18s %-32s %-6s %s\n", len(m.rows), "FLOW", "BOUNDARY", "RESULT", "FAILED REQUESTS web/kv")
	failed := 0
	for _, r := range m.rows {
		res := "pass"
		if !r.pass {
			res, failed = "FAIL", failed+1
		}
		fmt.Fprintf(&b, "%-18s %-32s %-6s %d/%d\n", r.flow, r.boundary, res, r.webFailed, r.kvFailed)
	}
	fmt.Fprintf(&b, "%d of %d cells failed", failed, len(m.rows))
	t.Log(b.String())
}

// flow enumerates the boundaries of one clean run of the verb prepare
// returns (after prepare brought the app to the flow's start), then kills
// the verb at each boundary in turn, reconciles once and checks (after
// restores what the next round starts from). withLoad: the load's failures
// from the kill to the end of the checks must be zero.
func (m *kmRun) flow(name string, withLoad bool, prepare func() []string, after func(t *testing.T)) {
	t := m.t
	args := prepare()
	bounds, r := enumerateVerb(t, m.a.State, args...)
	require.Equal(t, 0, r.Code, "clean %s: %s", name, r.String())
	require.NotEmpty(t, bounds)
	after(t)
	// The revision store's writes come before the op is claimed: a kill
	// there is a kill before the verb (what status shows then is
	// TestStatus_FullDiskBeforeTheClaimIsNotShownAsDeployed's).
	bounds = slices.DeleteFunc(bounds, func(b boundary) bool {
		return strings.HasPrefix(b.Method, "SaveRevision#") || strings.HasPrefix(b.Method, "SaveDesired#")
	})
	t.Logf("%s: %d journal boundaries: %v", name, len(bounds), bounds)
	for _, b := range bounds {
		row := kmRow{flow: name, boundary: b.String()}
		row.pass = t.Run(name+"/"+b.String(), func(t *testing.T) {
			args := prepare()
			web0, kv0 := failsOf(m.webLoad), failsOf(m.kvLoad)
			crashVerbAt(t, m.a.State, b, args...)
			assert.Empty(t, waitNoPlugins(fixture.FaultBin(), 3*time.Second), "plugins died with the killed CLI")
			rec := fixture.RunCLI(t, fixture.NormalBin(), m.a.State, nil, "reconcile", m.a.Name)
			assert.Equal(t, 0, rec.Code, "reconcile after a kill at %s/%s: %s", name, b, rec.String())
			after(t)
			row.webFailed, row.kvFailed = failsOf(m.webLoad)-web0, failsOf(m.kvLoad)-kv0
			if withLoad {
				assert.Zero(t, row.webFailed, "failed requests on web (overlap) from the kill to the end of the checks; first errors so far: %v", m.webLoad.Errors())
				assert.Zero(t, row.kvFailed, "failed (not held) requests on kv (single-writer) from the kill to the end of the checks; first errors so far: %v", m.kvLoad.Errors())
			}
		})
		m.rows = append(m.rows, row)
		if !row.pass {
			m.resync(t)
		}
	}
}

// failsOf is l's failed requests so far (0 for none or a stopped run's
// final count).
func failsOf(l *loadgen.HTTPRun) int64 {
	if l == nil {
		return 0
	}
	_, f := l.Snapshot()
	return f
}

// reset deploys the current images unchanged, so every round starts from a
// terminal, successful latest op like the enumerating run (resetLatestOp).
func (m *kmRun) reset() {
	m.a.Write(kmManifest(m.a.Name, m.curWeb, m.curKV))
	resetLatestOp(m.t, m.a.State, m.a.File)
}

// afterDeploy checks the invariants and records the images now serving.
func (m *kmRun) afterDeploy(t *testing.T) { m.check(t) }

// resync re-reads the serving images after a failed cell, so later cells
// still test something.
func (m *kmRun) resync(t *testing.T) {
	st := appStatusJSON(t, m.a.State, m.a.Name)
	for _, s := range st.Services {
		switch s.Service {
		case "web":
			m.curWeb = s.Image
		case "kv":
			m.curKV = s.Image
		}
	}
}

// check asserts the converged state (see the file comment) and records the
// serving images.
func (m *kmRun) check(t *testing.T) {
	t.Helper()
	st := appStatusJSON(t, m.a.State, m.a.Name)
	var owned []string
	for _, s := range st.Services {
		require.NotEmpty(t, s.Container, "ACTIVE names a container for %s", s.Service)
		assert.Equal(t, "running", s.State, "%s: ACTIVE's container %s runs", s.Service, short(s.Container))
		assert.Equal(t, []string{s.Container}, fixture.Managed(t, m.a.Name, s.Service), "exactly one generation of %s", s.Service)
		owned = append(owned, s.Container)
		port := s.BackendBinds["8080"]
		require.NotZero(t, port, "%s: ACTIVE records the 8080 bind", s.Service)
		switch s.Service {
		case "web":
			m.curWeb = s.Image
			assertEdgeServes(t, m.a.Edge, kmWebHost, "/", bindAddr(s.IP, port), httpIdent)
		case "kv":
			m.curKV = s.Image
			assertEdgeServes(t, m.a.Edge, kmKVHost, "/version", bindAddr(s.IP, port), kvIdent)
			code, body, err := m.a.Edge.Get(kmKVHost, "/k/greeting")
			require.NoError(t, err)
			assert.Equal(t, 200, code, body)
			assert.Equal(t, "hello", strings.TrimSpace(body), "data written before the kills survives")
		}
	}
	require.Len(t, owned, 2, "both services in ACTIVE: %+v", st.Services)
	assert.ElementsMatch(t, owned, fixture.Managed(t, m.a.Name, ""), "no container labelled for the app that no record owns")
	assert.Empty(t, st.Markers, "no marker left")
	op := latestOpJSON(t, m.a.State, m.a.Name)
	assert.NotEmpty(t, op.Outcome, "latest op %s (%s) is terminal: %+v", op.ID, op.Kind, op.Steps)
}

// assertEdgeServes asserts that host+path through the edge answers 200
// with the identity the container answers at its own address (addr).
func assertEdgeServes(t *testing.T, edge *fixture.Edge, host, path string, addr string, ident func(string) string) {
	t.Helper()
	code, direct, err := httpGet(addr, "", path)
	require.NoError(t, err, "GET %s at %s", host, addr)
	require.Equal(t, 200, code, direct)
	want := ident(direct)
	if assert.Eventually(quietT{}, func() bool {
		c, b, err := edge.Get(host, path)
		return err == nil && c == 200 && ident(b) == want
	}, 2*time.Second, 100*time.Millisecond) {
		return
	}
	c, b, err := edge.Get(host, path)
	last := fmt.Sprintf("%d %v %q", c, err, b)
	assert.Fail(t, "the edge does not route "+host+" to ACTIVE's container", "want %q, last edge answer %s", want, last)
}

// redeployForRemove brings the app back (a fresh incarnation after a
// remove: the retained volume is dropped first so the new incarnation owns
// its own) and returns the remove verb.
func (m *kmRun) redeployForRemove() []string {
	t := m.t
	if sts := appStatusList(t, m.a.State, m.a.Name); len(sts) == 0 || len(sts[0].Services) == 0 {
		out, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=dev.gordon.app="+m.a.Name).Output()
		for _, v := range strings.Fields(string(out)) {
			require.NoError(t, exec.Command("docker", "volume", "rm", "-f", v).Run())
		}
		m.a.MustDeploy(kmManifest(m.a.Name, m.curWeb, m.curKV))
	}
	return []string{"remove", m.a.Name}
}

// afterRemove: whatever the kill left, nothing is unowned after the
// reconcile, and one more remove finishes: no container of the app is left.
func (m *kmRun) afterRemove(t *testing.T) {
	t.Helper()
	if sts := appStatusList(t, m.a.State, m.a.Name); len(sts) == 1 && len(sts[0].Services) > 0 {
		var owned []string
		for _, s := range sts[0].Services {
			if s.Container != "" {
				owned = append(owned, s.Container)
			}
		}
		for _, c := range fixture.Managed(t, m.a.Name, "") {
			assert.True(t, slices.Contains(owned, c) || markerNames(sts[0], c), "container %s is owned by ACTIVE or a marker", short(c))
		}
		r := fixture.RunCLI(t, fixture.NormalBin(), m.a.State, nil, "remove", m.a.Name)
		require.Equal(t, 0, r.Code, "remove after the killed remove: %s", r.String())
	}
	assert.Empty(t, fixture.Managed(t, m.a.Name, ""), "no container of the removed app is left")
}

// markerNames reports whether a marker of st names container c.
func markerNames(st statusJSON, c string) bool {
	for _, raw := range st.Markers {
		if strings.Contains(string(raw), c) {
			return true
		}
	}
	return false
}

// appStatusList is `status APP --format json` of an app that may be gone:
// nil when status refuses (unknown app).
func appStatusList(t testing.TB, stateDir, app string) []statusJSON {
	t.Helper()
	r := fixture.RunCLI(t, fixture.NormalBin(), stateDir, nil, "status", app, "--format", "json")
	if r.Code != 0 {
		return nil
	}
	var sts []statusJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &sts), r.String())
	return sts
}
