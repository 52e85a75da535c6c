package swarmlab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// R80 end to end on a lab of three managers: the manager whose state
// directory holds the apps is killed (-9, under load through another
// node's edge); `system start` on another manager with an empty state
// directory adopts the apps from their state configs (refused while the
// first manager was up), keeps the running edge (its registry, token,
// ports and image: no edge task is replaced) without a flag,
// and deploys from there; no request fails; the old state directory is
// refused from then on.
func TestSwarm_AnotherManagerAdoptsTheAppsWhenItsManagerIsLost(t *testing.T) {
	need(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	g := upGordonLab(ctx, t, "gsa", "10.76.0", true)
	stateB := filepath.Join(t.TempDir(), "state-b")

	g.must(ctx, t, "system", "start", "--registry", g.Registry, "--http-addr", ":80", "--tcp-ports", "9000")
	g.must(ctx, t, "deploy", "-f", writeManifest(t, webManifest(g.httpd, "v1")))
	require.Eventually(t, func() bool {
		ids, err := g.Docker(ctx, 2, "config", "ls", "-q", "--filter", "label=dev.gordon.state=web")
		if err != nil || len(strings.Fields(ids)) != 1 {
			return false
		}
		out, err := g.Docker(ctx, 2, "config", "inspect", "--format", `{{index .Spec.Labels "dev.gordon.state-hash"}}`, ids)
		b, ok, berr := swarm.ReadBundle(g.state, "web")
		return err == nil && berr == nil && ok && out == b.Hash()
	}, 30*time.Second, 200*time.Millisecond, "the reconcile loop mirrors web's records, as they are now, into one state config")

	r := g.gordonOn(ctx, 2, stateB, "system", "start", "--http-addr", ":80")
	require.NotEqual(t, 0, r.code, "a takeover while the first manager is up is refused:\n%s", r)
	assert.Contains(t, r.err, "system start --adopt")
	_, err := os.Stat(filepath.Join(stateB, "apps"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the refusal wrote nothing")
	stateC := filepath.Join(t.TempDir(), "state-c")
	r = g.gordonOn(ctx, 1, stateC, "system", "start")
	require.NotEqual(t, 0, r.code, "a second state directory on the same manager is refused too:\n%s", r)
	_, err = os.Stat(filepath.Join(stateC, "swarm.json"))
	assert.ErrorIs(t, err, os.ErrNotExist, "that refusal wrote nothing either")
	// A state config that does not decode (written by hand, or by a
	// broken build) is skipped by the adoption, never fatal.
	junk := filepath.Join(t.TempDir(), "junk")
	require.NoError(t, os.WriteFile(junk, []byte("not a gzip bundle"), 0o644))
	_, err = g.Docker(ctx, 2, "config", "create", "--label", "dev.gordon.state=junk", "--label", "dev.gordon.state-node=gone", "gordon-state-junk", junk)
	require.NoError(t, err)

	edgeImage := func() string {
		out, err := g.Docker(ctx, 2, "service", "inspect", "gordon-edge", "--format", "{{.Spec.TaskTemplate.ContainerSpec.Image}}")
		require.NoError(t, err)
		return out
	}
	edgeOn := func(i int) string {
		out, err := g.Docker(ctx, i, "ps", "-q", "--filter", "label=com.docker.swarm.service.name=gordon-edge")
		require.NoError(t, err)
		return out
	}
	image0, edge2, edge3 := edgeImage(), edgeOn(2), edgeOn(3)

	load := startLabLoad(t, g.Lab, "http://"+g.Nodes[1].IP+"/", "web.lab", 8, 5*time.Minute)
	load.awaitOK(t, 200, 30*time.Second)
	t0 := time.Now()
	require.NoError(t, g.KillNode(1))
	require.Eventually(t, func() bool {
		out, err := g.Docker(ctx, 2, "node", "ls", "--format", "{{.Hostname}} {{.Status}}")
		return err == nil && strings.Contains(out, g.Nodes[0].Name+" Down")
	}, 60*time.Second, 250*time.Millisecond, "the swarm marks the killed manager down")
	t.Logf("manager %s down after %v", g.Nodes[0].Name, time.Since(t0).Round(time.Millisecond))
	phase := func(what string) {
		ok, failed := load.counts()
		t.Logf("load %s: %d OK, %d failed", what, ok, failed)
	}
	phase("until the manager is down")
	defer func() {
		if t.Failed() {
			out, _ := g.Docker(ctx, 2, "logs", "--tail", "60", "gordon-reconcile")
			t.Logf("gordon-reconcile on %s:\n%s", g.Nodes[1].Name, out)
		}
	}()

	t1 := time.Now()
	r = g.gordonOn(ctx, 2, stateB, "system", "start")
	require.Equal(t, 0, r.code, "system start on another manager adopts:\n%s", r)
	t.Logf("system start on %s in %v:\n%s", g.Nodes[1].Name, time.Since(t1).Round(time.Millisecond), r)
	assert.Contains(t, r.out, "app web: adopted from the swarm")
	assert.Contains(t, r.err, "warning: not adopted: app junk", "the undecodable config is skipped, with why")
	phase("until system start returned")
	require.Eventually(t, func() bool {
		out, err := g.Docker(ctx, 2, "logs", "gordon-reconcile")
		return err == nil && strings.Contains(out, "web")
	}, 30*time.Second, 200*time.Millisecond, "the adopting reconcile loop passes over web")
	phase("until its first pass")
	assert.Contains(t, r.out, "taken over (its tasks run on)", "only the edge's owner changes")
	assert.Contains(t, r.out, "TCP :9000", "the edge's settings (its TCP port) are the adopted ones")
	assert.Equal(t, image0, edgeImage(), "the edge keeps its image (the registry's digest of the same build)")
	assert.Equal(t, edge2, edgeOn(2), "the edge task on %s is not replaced", g.Nodes[1].Name)
	assert.Equal(t, edge3, edgeOn(3), "the edge task on %s is not replaced", g.Nodes[2].Name)

	t2 := time.Now()
	r = g.gordonOn(ctx, 2, stateB, "deploy", "-f", writeManifest(t, webManifest(g.httpd, "v2")))
	require.Equal(t, 0, r.code, "a deploy from the adopting manager:\n%s", r)
	t.Logf("deploy from the adopting manager in %v", time.Since(t2).Round(time.Millisecond))
	phase("until the deploy returned")
	for _, n := range g.Nodes[1:] {
		require.Eventually(t, func() bool {
			out, err := g.InLab(ctx, "curl", "-sf", "--max-time", "2", "-H", "Host: web.lab", "http://"+n.IP+"/")
			return err == nil && strings.Contains(out, "version=v2")
		}, 30*time.Second, 250*time.Millisecond, "the edge on %s serves the new generation", n.Name)
	}
	load.awaitOK(t, 200, 30*time.Second)
	st := load.Stop()
	t.Logf("load through %s while its manager died and another took over: %d OK, %d failed, p99 %v, max %v, errors %v",
		g.Nodes[1].Name, st.OK, st.Failed(), st.P99, st.Max, st.Errors)
	assert.Zero(t, st.Failed(), "no request fails: %v", st.Errors)

	r = g.gordonOn(ctx, 2, stateB, "status")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Regexp(t, `(?m)^web +`, r.out, "the adopting state directory serves web")

	r = g.gordonOn(ctx, 2, g.state, "deploy", "-f", writeManifest(t, webManifest(g.httpd, "v3")))
	require.NotEqual(t, 0, r.code, "the old state directory is refused:\n%s", r)
	assert.Contains(t, r.err, "no longer drives the swarm")
	t.Logf("whole test in %v", time.Since(began).Round(time.Millisecond))
}
