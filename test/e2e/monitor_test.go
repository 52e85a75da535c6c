package e2e

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// monitorRateRE matches the measured rate the rollback error names.
var monitorRateRE = regexp.MustCompile(`automatic rollback of service web: error rate \d+% \((\d+) of (\d+) requests\) exceeded max_error_rate 5%`)

// R76 against the real engine: v1 serves; v2 passes readiness (/healthz)
// but answers 500 on / (FAIL_ROOT). Under light load through the edge,
// the deploy with [services.web.monitor] sees the error rate, rolls back
// by itself and fails with the measured rate; afterwards the original v1
// container serves / again and the bad container is gone.
func TestR76_ErrorRateAfterSwitchRollsBackAutomatically(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	const host = "h27mone2e.test"
	a := fixture.NewApp(t, "e2e-h27mone2e")
	a.MustDeploy(webManifest(a.Name, v1, host, ""))
	good := fixture.Managed(t, a.Name, "web")
	require.Len(t, good, 1)
	code, body, err := a.Edge.Get(host, "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	require.Equal(t, "v1", versionOf(body))

	l := fixture.StartLoad(t, "http://"+a.Edge.HTTPAddr+"/", host, 1, nil)
	bad := webManifest(a.Name, v2, host, `[services.web.env]
FAIL_ROOT = "true"
[services.web.monitor]
window = "10s"
max_error_rate = 0.05
min_requests = 5
`)
	t0 := time.Now()
	op, r := a.Deploy(bad)
	took := time.Since(t0)
	st := l.Stop()
	t.Logf("bad deploy took %s; load during it: %s", took.Round(time.Millisecond), st)
	require.NotEqual(t, 0, r.Code, "the deploy of a failing generation must fail: %s", r.String())
	m := monitorRateRE.FindStringSubmatch(r.Stderr)
	require.NotNil(t, m, "the error names the automatic rollback and the measured rate: %s", r.String())
	t.Logf("measured: %s", m[0])
	require.NotEqual(t, "success", op.Outcome)
	require.Greater(t, st.Non2xx, int64(0), "the load saw the bad generation's 500s")
	var journaled struct {
		Steps []struct{ ID, Result, Detail string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &journaled), r.String())
	i := slices.IndexFunc(journaled.Steps, func(s struct{ ID, Result, Detail string }) bool { return s.ID == "service.web.monitor" })
	require.GreaterOrEqual(t, i, 0, "the op has a service.web.monitor step: %s", r.Stdout)
	require.Equal(t, "rolled-back (automatic)", journaled.Steps[i].Result, journaled.Steps[i].Detail)

	// The original v1 container serves again; the bad one is gone.
	assert.Eventually(t, func() bool { return slices.Equal(fixture.Managed(t, a.Name, "web"), good) }, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, good, fixture.Managed(t, a.Name, "web"), "only the original v1 container remains")
	require.Equal(t, good, fixture.Running(a.Name, "web"), "the original v1 container runs")
	// The first answer after the deploy returned is awaited (5 s), and
	// anything else seen meanwhile is logged: once in 24 runs one request
	// here got a non-200 (cause not found yet: a stale upstream connection
	// to the restarted standby is the suspect). Then 20 in a row must be
	// v1's.
	require.Eventually(t, func() bool {
		code, body, err := a.Edge.Get(host, "/")
		if err != nil || code != 200 || versionOf(body) != "v1" {
			t.Logf("right after the rollback: code=%d err=%v body=%q", code, err, body)
			return false
		}
		return true
	}, 5*time.Second, 50*time.Millisecond, "the restored v1 generation answers")
	for range 20 {
		code, body, err := a.Edge.Get(host, "/")
		require.NoError(t, err)
		require.Equal(t, 200, code, body)
		require.Equal(t, "v1", versionOf(body), body)
	}
}
