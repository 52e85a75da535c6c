package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// spread sends n requests for host through the edge and counts answers
// per instance (the httpd workload's instance=, random per process).
func spread(t *testing.T, edge *fixture.Edge, host string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		code, body, err := edge.Get(host, "/")
		require.NoError(t, err)
		require.Equal(t, 200, code, body)
		got[instanceOf([]byte(body))]++
	}
	return got
}

// Replicas against the real engine: replicas = 3 runs three containers,
// the edge spreads requests over them (each at least 15 %); a deploy of
// the set under load fails 0 requests and never leaves fewer than 3
// running; scale 3 → 2 → 4 → 2 under load fails 0 and keeps the serving
// instances (R69); replicas on a volume-backed
// service are refused and nothing changes.
func TestReplicas_SpreadDeployAndScaleUnderLoad(t *testing.T) {
	imgs := testimages.Require(t, "v1", "httpd")
	v1 := imgs["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2erep")
	app, edge := a.Name, a.Edge
	a.MustDeploy(webManifest(app, v1, "rep.test", "replicas = 3"))
	require.Len(t, fixture.Managed(t, app, "web"), 3)
	got := spread(t, edge, "rep.test", 300)
	require.Len(t, got, 3, "three instances answer: %v", got)
	for inst, n := range got {
		require.GreaterOrEqual(t, n, 45, "instance %s answered %d of 300: %v", inst, n, got)
	}

	// A deploy of the set under load: never fewer than 3 running.
	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/", "rep.test", 8, nil)
	stop := make(chan struct{})
	minRunning := make(chan int, 1)
	go func() {
		low := 3
		for {
			select {
			case <-stop:
				minRunning <- low
				return
			case <-time.After(100 * time.Millisecond):
			}
			if n := len(fixture.Running(app, "web")); n < low {
				low = n
			}
		}
	}()
	a.MustDeploy(webManifest(app, v2, "rep.test", "replicas = 3"))
	close(stop)
	require.Equal(t, 3, <-minRunning, "fewer than 3 instances ran during the deploy")
	require.Len(t, fixture.Managed(t, app, "web"), 3)

	// R69: scale keeps the serving instances: 3 → 2 stops one of them,
	// 2 → 4 adds two beside the two that serve.
	three := fixture.Managed(t, app, "web")
	r := a.Gordon("scale", app, "web=2")
	require.Equal(t, 0, r.Code, r.String())
	two := fixture.Managed(t, app, "web")
	require.Len(t, two, 2)
	require.Subset(t, three, two, "scaling down keeps two of the serving instances")
	r = a.Gordon("scale", app, "web=4")
	require.Equal(t, 0, r.Code, r.String())
	four := fixture.Managed(t, app, "web")
	require.Len(t, four, 4)
	require.Subset(t, four, two, "scaling up keeps the serving instances")
	require.Len(t, spread(t, edge, "rep.test", 80), 4, "the new instances are routed")
	r = a.Gordon("scale", app, "web=2")
	require.Equal(t, 0, r.Code, r.String())
	require.Len(t, fixture.Managed(t, app, "web"), 2)
	st := l.Stop()
	t.Logf("load over a deploy and scales of the set (3 → 2 → 4 → 2): %s", st)
	require.Greater(t, st.Answered, int64(50))
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)
	require.Len(t, spread(t, edge, "rep.test", 40), 2)

	// Replicas on a volume-backed service: refused, nothing changes.
	before := fixture.Managed(t, app, "web")
	_, r = a.Deploy(webManifest(app, v2, "rep.test", "replicas = 2\n[[services.web.volume]]\nname = \"data\"\npath = \"/data\""))
	require.NotEqual(t, 0, r.Code)
	require.Contains(t, r.Stderr, "the service runs one instance (single-writer: volume data)")
	require.ElementsMatch(t, before, fixture.Managed(t, app, "web"))
}

// Compose deploy.replicas: 2 runs two instances behind the edge.
func TestReplicas_ComposeDeployReplicas(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2erepc")
	dir := filepath.Join(t.TempDir(), "p")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, "compose.yaml")
	fixture.WriteFile(t, file, fmt.Sprintf(`name: %s
services:
  web:
    image: %s
    deploy:
      replicas: 2
    x-gordon:
      host: repc.test
      port: 8080
      readiness: { type: http, path: /healthz, timeout: 20s }
`, a.Name, v1))
	op, r := fixture.DeployJSON(t, a.State, file)
	require.Equal(t, 0, r.Code, r.String())
	require.Equal(t, "success", op.Outcome)
	require.Len(t, fixture.Managed(t, a.Name, "web"), 2)
	require.Len(t, spread(t, a.Edge, "repc.test", 40), 2)
}
