package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// R58 (held, not refused): a volume-backed HTTP service (sequential flow)
// replaced 3 times under 8 keep-alive clients through the edge loses no
// request: while it is between generations the edge holds its requests
// and releases them to the new generation once it is routed. The longest
// wait is logged.
func TestR58_SequentialReplacementsUnderLoadLoseNothing(t *testing.T) {
	k1 := testimages.Require(t, "v1", "kv")["kv"]
	k2 := testimages.Require(t, "v2", "kv")["kv"]
	a := fixture.NewApp(t, "e2ehold")
	state, app, edge := a.State, a.Name, a.Edge
	manifest := func(img string) string { return kvManifest(app, img, "hold.test") }
	file := a.File
	a.MustDeploy(manifest(k1))
	require.NoError(t, edge.Put("hold.test", "/k/greeting", "hello"))

	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/k/greeting", "hold.test", 8, nil)
	for i, img := range []string{k2, k1, k2} {
		fixture.WriteFile(t, file, manifest(img))
		op, r := fixture.DeployJSON(t, state, file)
		require.Equal(t, 0, r.Code, "replacement %d: %s", i+1, r.String())
		require.Equal(t, "success", op.Outcome)
	}
	st := l.Stop()
	t.Logf("3 sequential replacements under 8 keep-alive clients: %s (max = the longest wait)", st)
	require.Greater(t, st.Answered, int64(100))
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)
}
