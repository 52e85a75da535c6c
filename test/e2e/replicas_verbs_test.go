package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// statusServices is the part of `status APP --format json` these tests read.
type statusServices []struct {
	Services []struct {
		Service   string
		Container string
		Declared  int
		Serving   int
		Instances []struct{ Container, State string }
	}
}

func webStatus(t *testing.T, a *fixture.App) (declared, serving int, containers []string) {
	t.Helper()
	r := a.Gordon("status", a.Name, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var st statusServices
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &st), r.Stdout)
	require.Len(t, st, 1)
	for _, s := range st[0].Services {
		if s.Service == "web" {
			for _, in := range s.Instances {
				containers = append(containers, in.Container)
			}
			return s.Declared, s.Serving, containers
		}
	}
	t.Fatalf("no web in status: %s", r.Stdout)
	return
}

var execInstanceRE = regexp.MustCompile(`instance (\d) of (\d) \(container ([0-9a-f]{12})\)`)

// Replicas in every verb, against the real engine: a deploy of 3 replicas
// under load fails 0 requests; exec --instance 1, 2 and 3 reach three
// different containers with three different hostnames (<service>-<n>);
// logs merges the three with web-1 |, web-2 |, web-3 | prefixes and
// --instance narrows it; status lists 3 of 3; stop then start gives 3.
func TestReplicas_EveryVerbSeesEveryInstance(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2erepv")
	app, edge := a.Name, a.Edge
	a.MustDeploy(webManifest(app, v1, "repv.test", "replicas = 3"))

	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/", "repv.test", 8, nil)
	a.MustDeploy(webManifest(app, v2, "repv.test", "replicas = 3"))
	st := l.Stop()
	t.Logf("load over a deploy of 3 replicas: %s", st)
	require.Greater(t, st.Answered, int64(50))
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)
	require.Len(t, spread(t, edge, "repv.test", 90), 3, "three instances answer")

	declared, serving, insts := webStatus(t, a)
	require.Equal(t, 3, declared)
	require.Equal(t, 3, serving)
	require.Len(t, insts, 3)

	hostnames := map[string]string{}
	for n := 1; n <= 3; n++ {
		r := a.Gordon("exec", app, "web", "--instance", fmt.Sprint(n), "--", "/httpd", "-get", "http://127.0.0.1:8080/healthz")
		require.Equal(t, 0, r.Code, r.String())
		m := execInstanceRE.FindStringSubmatch(r.Stderr)
		require.NotNil(t, m, "exec names the instance: %s", r.Stderr)
		require.Equal(t, []string{fmt.Sprint(n), "3"}, m[1:3])
		require.True(t, strings.HasPrefix(insts[n-1], m[3]), "instance %d is status's instance %d: %s vs %s", n, n, m[3], insts[n-1])
		out, err := exec.Command("docker", "inspect", "-f", "{{.Config.Hostname}}", m[3]).Output()
		require.NoError(t, err)
		hostnames[m[3]] = strings.TrimSpace(string(out))
	}
	require.Len(t, hostnames, 3, "three different containers: %v", hostnames)
	seen := map[string]bool{}
	for _, h := range hostnames {
		seen[h] = true
	}
	require.Len(t, seen, 3, "three different hostnames: %v", hostnames)
	assert.True(t, seen["web-1"] && seen["web-2"] && seen["web-3"], "hostnames are web-1 … web-3: %v", hostnames)

	r := a.Gordon("logs", app, "--service", "web")
	require.Equal(t, 0, r.Code, r.String())
	for n := 1; n <= 3; n++ {
		assert.Contains(t, r.Stdout, fmt.Sprintf("web-%d | listening on :8080", n), "logs merges every instance")
	}
	r = a.Gordon("logs", app, "--service", "web", "--instance", "2")
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stdout, "listening on :8080")
	assert.NotContains(t, r.Stdout, "web-1 |")
	assert.NotContains(t, r.Stdout, "web-3 |")

	r = a.Gordon("stop", app)
	require.Equal(t, 0, r.Code, r.String())
	require.Empty(t, fixture.Running(app, "web"))
	r = a.Gordon("start", app)
	require.Equal(t, 0, r.Code, r.String())
	require.Len(t, fixture.Running(app, "web"), 3, "start restores the declared count")
	declared, serving, _ = webStatus(t, a)
	require.Equal(t, 3, declared)
	require.Equal(t, 3, serving)
	require.Len(t, spread(t, edge, "repv.test", 90), 3, "three instances answer after start")
}
