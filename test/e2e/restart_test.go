package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// R53 (restart of an overlap-eligible service is an overlap of the same
// spec): `restart APP --service web` of a stateless routed service under 8
// keep-alive clients through the edge fails no request and no client goes
// back to the generation it left; afterwards exactly one container of the
// service runs, a new one, on the same image.
func TestR53_RestartOfAStatelessServiceUnderLoadLosesNothing(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2erestart")
	app, edge := a.Name, a.Edge
	a.MustDeploy(webManifest(app, v1, "restart.test", ""))
	before := fixture.Managed(t, app, "web")
	require.Len(t, before, 1)

	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/", "restart.test", 8, instanceOf)
	for i := range 2 {
		r := a.Gordon("restart", app, "--service", "web")
		require.Equal(t, 0, r.Code, "restart %d: %s", i+1, r.String())
	}
	st := l.Stop()
	t.Logf("2 restarts under 8 keep-alive clients: %s", st)
	require.Greater(t, st.Answered, int64(50))
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)
	require.Zero(t, st.Regressions, "a client went back to an older generation: %v", st.Errors)
	after := fixture.Managed(t, app, "web")
	require.Len(t, after, 1, "one container of web after the restarts")
	require.NotEqual(t, before[0], after[0], "the restart replaced the container")
	code, body, err := edge.Get("restart.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.Equal(t, "v1", versionOf(body), "the restart keeps the pinned image")
}

// R53 + R58 (held, not refused): restarting a volume-backed HTTP service
// (single-writer: in place) under 8 keep-alive clients fails no request:
// the edge holds its requests while it restarts and releases them to it
// once it is routed again.
func TestR58_RestartOfASingleWriterServiceHoldsItsRequests(t *testing.T) {
	k1 := testimages.Require(t, "v1", "kv")["kv"]
	a := fixture.NewApp(t, "e2erestarthold")
	app, edge := a.Name, a.Edge
	a.MustDeploy(kvManifest(app, k1, "rhold.test"))
	require.NoError(t, edge.Put("rhold.test", "/k/greeting", "hello"))

	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/k/greeting", "rhold.test", 8, nil)
	for i := range 2 {
		r := a.Gordon("restart", app, "--service", "kv")
		require.Equal(t, 0, r.Code, "restart %d: %s", i+1, r.String())
	}
	st := l.Stop()
	t.Logf("2 in-place restarts under 8 keep-alive clients: %s (max = the longest wait)", st)
	require.Greater(t, st.Answered, int64(50))
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)
	require.Len(t, fixture.Managed(t, app, "kv"), 1)
}
