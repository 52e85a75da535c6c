package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// slowStoreManifest is a volume-backed HTTP service whose program listens
// 2 s after it starts, with no readiness block (the image has no
// HEALTHCHECK).
func slowStoreManifest(app, image, host string) string {
	return fmt.Sprintf(`name = %q
[services.store]
image = %q
stop_grace = "10s"
[services.store.env]
START_DELAY = "2s"
[[services.store.volume]]
name = "data"
path = "/data"
[[services.store.http]]
port = 8080
host = %q
`, app, image, host)
}

// R29 (readiness by default): a volume-backed HTTP service with no
// readiness block and no image HEALTHCHECK, whose program listens 2 s
// after it starts, is probed with a TCP connect on its port before it is
// routed. Replaced sequentially 3 times under 8 keep-alive clients
// through the edge, it loses no request; validate and the dry run name
// the check and where it comes from.
func TestR29_SlowStartingVolumeServiceWithoutReadinessLosesNothing(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2eslowstore")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File
	a.MustDeploy(slowStoreManifest(app, v1, "slowstore.test"))

	fixture.WriteFile(t, file, slowStoreManifest(app, v2, "slowstore.test"))
	r := fixture.Gordon(t, state, "validate", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stdout, "store: readiness tcp connect :8080 (default)")
	r = fixture.Gordon(t, state, "deploy", "--dry-run", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stdout, "readiness: tcp connect :8080 (default)")

	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/", "slowstore.test", 8, nil)
	for i, img := range []string{v2, v1, v2} {
		fixture.WriteFile(t, file, slowStoreManifest(app, img, "slowstore.test"))
		op, r := fixture.DeployJSON(t, state, file)
		require.Equal(t, 0, r.Code, "replacement %d: %s", i+1, r.String())
		require.Equal(t, "success", op.Outcome)
	}
	st := l.Stop()
	t.Logf("3 sequential replacements of a slow-starting store without readiness, 8 keep-alive clients: %s", st)
	require.Greater(t, st.Answered, int64(100))
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)

	r = fixture.Gordon(t, state, "status", app)
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stdout, "store: readiness tcp connect :8080 (default)")
}
