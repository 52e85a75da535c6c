package e2e

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// SPEC R21 passive health against the real engine:
// `docker kill` of one of 3 replicas under load fails 0 requests (the
// edge ejects the dead instance and retries its requests on another), and
// `edge status --format json` shows the ejection.
func TestR21_KillReplicaUnderLoadFailsNothing(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2eh24lb")
	a.MustDeploy(webManifest(a.Name, v1, "h24lb.test", "replicas = 3"))
	ids := fixture.Managed(t, a.Name, "web")
	require.Len(t, ids, 3)

	l := fixture.StartLoad(t, "http://"+a.Edge.HTTPAddr+"/", "h24lb.test", 8, nil)
	waitAnswered(t, l.Snapshot, 200)
	require.NoError(t, exec.Command("docker", "kill", ids[0]).Run())
	killed := time.Now()
	// Load on until the edge reports the ejection (bounded), then 200 more
	// answers over the set without the dead instance.
	assert.Eventually(t, func() bool { return ejectedBackend(t, a).EjectReason != "" }, 10*time.Second, 100*time.Millisecond)
	ejected := ejectedBackend(t, a)
	answered, _ := l.Snapshot()
	waitAnswered(t, l.Snapshot, answered+200)
	st := l.Stop()
	t.Logf("load over a killed replica: %s (ejection seen after %s: %+v)", st, time.Since(killed).Round(time.Millisecond), ejected)
	require.Greater(t, st.Answered, int64(200))
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)
	require.NotEmpty(t, ejected.EjectReason, "edge status never showed the killed instance ejected")
}

// waitAnswered waits (10 s at most) until the load answered n requests.
func waitAnswered(t *testing.T, snapshot func() (int64, int64), n int64) {
	t.Helper()
	require.Eventually(t, func() bool { answered, _ := snapshot(); return answered >= n }, 10*time.Second, 20*time.Millisecond, "the load got no answers")
}

// waitMoreAnswers waits (10 s at most) until the load answered n more
// requests than it had when called: traffic that spans what the test
// does next, counted rather than timed.
func waitMoreAnswers(t *testing.T, snapshot func() (int64, int64), n int64) {
	t.Helper()
	answered, _ := snapshot()
	waitAnswered(t, snapshot, answered+n)
}

// ejectedBackend returns the first backend `edge status --format json`
// reports ejected (zero: none).
func ejectedBackend(t *testing.T, a *fixture.App) routetable.BackendStatus {
	t.Helper()
	r := a.Gordon("edge", "status", "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var view struct {
		Backends []routetable.BackendStatus `json:"backends"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &view), r.Stdout)
	for _, b := range view.Backends {
		if b.EjectReason != "" {
			return b
		}
	}
	return routetable.BackendStatus{}
}

// inFlight is the number of requests the edge reports in flight to a's
// backends, or -1 when `edge status` did not answer.
func inFlight(a *fixture.App) int64 {
	r := a.Gordon("edge", "status", "--format", "json")
	var view struct {
		Backends []routetable.BackendStatus `json:"backends"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &view) != nil {
		return -1
	}
	var n int64
	for _, b := range view.Backends {
		n += b.InFlight
	}
	return n
}
