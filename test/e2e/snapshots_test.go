package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// getKV reads key through the edge.
func getKV(t *testing.T, a *fixture.App, host, key string) string {
	t.Helper()
	code, body, err := a.Edge.Get(host, "/k/"+key)
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	return body
}

// Data you can roll back (docs/data.md), against the real engine: a
// volume-backed service stores data; v2 is deployed under load with no
// failed request (its volume is snapshotted from the stopped v1 while the
// edge holds); v2 changes the data; `rollback --with-data` brings back v1
// and the data it had. A rollback --with-data with no snapshot before it
// is refused and changes nothing.
func TestSnapshots_RollbackWithDataBringsBackTheCodeAndItsData(t *testing.T) {
	k1 := testimages.Require(t, "v1", "kv")["kv"]
	k2 := testimages.Require(t, "v2", "kv")["kv"]
	const host = "snaps.test"
	a := fixture.NewApp(t, "e2esnaps")
	a.MustDeploy(kvManifest(a.Name, k1, host))
	require.NoError(t, a.Edge.Put(host, "/k/greeting", "from v1"))

	r := a.Gordon("rollback", a.Name, "--with-data")
	require.NotEqual(t, 0, r.Code, r.String())

	l := fixture.StartLoad(t, "http://"+a.Edge.HTTPAddr+"/k/greeting", host, 4, nil)
	op, r := a.Deploy(kvManifest(a.Name, k2, host))
	st := l.Stop()
	require.Equal(t, 0, r.Code, r.String())
	require.Equal(t, "success", op.Outcome)
	t.Logf("v2 under 4 keep-alive clients: %s", st)
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)

	ls := a.Gordon("snapshots", "ls", a.Name, "--format", "json")
	require.Equal(t, 0, ls.Code, ls.String())
	var snaps []struct {
		ID      string `json:"id"`
		Service string `json:"service"`
		Op      string `json:"op"`
		Trigger string `json:"trigger"`
	}
	require.NoError(t, json.Unmarshal([]byte(ls.Stdout), &snaps), ls.Stdout)
	require.Len(t, snaps, 1)
	require.Equal(t, op.ID, snaps[0].Op)
	require.Equal(t, "deploy", snaps[0].Trigger)

	require.NoError(t, a.Edge.Put(host, "/k/greeting", "from v2"))
	require.Equal(t, "from v2", getKV(t, a, host, "greeting"))
	r = a.Gordon("rollback", a.Name, "--with-data")
	require.Equal(t, 0, r.Code, r.String())
	_, v, err := a.Edge.Get(host, "/version")
	require.NoError(t, err)
	require.Equal(t, "v1", strings.TrimSpace(v))
	require.Equal(t, "from v1", getKV(t, a, host, "greeting"), "the data v1 had is back")
}
