package e2e

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// SPEC R21 passive health against the real engine (issue 24 acceptance):
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
	var ejected routetable.BackendStatus
	for time.Since(killed) < 10*time.Second && ejected.EjectReason == "" {
		ejected = ejectedBackend(t, a)
		time.Sleep(100 * time.Millisecond)
	}
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		if answered, _ := snapshot(); answered >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "the load got no answers")
		time.Sleep(20 * time.Millisecond)
	}
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
