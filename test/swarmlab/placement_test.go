package swarmlab

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	swarmrt "github.com/gordon-deploy/docker-gordon/plugins/runtime/swarm"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// On a 3-node lab: a volume-backed instance is pinned to
// the least loaded node at its first placement (recorded in
// placement.json and as the dev.gordon.node label), and its volume exists
// there only; the next generation of the same (app, service) lands on the
// same node although another node is now the least loaded; a runtime
// without the file adopts the node from the label; node = "<hostname>"
// (with a bind mount) and node = "<ID>" land on those nodes; when the
// pinned node is killed, StartContainer fails with the node's name within
// seconds of Swarm marking it down, instead of waiting forever.
func TestSwarmPlacement_VolumeBackedInstancesStayOnTheirNode(t *testing.T) {
	need(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := t.TempDir()
	require.NoError(t, testimages.Compile(ctx, bin, "sigd"))
	lab, err := Up(ctx, Options{Nodes: 3, Prefix: "gsr", Subnet: "10.76.0", Registry: true, Log: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { _ = lab.Down() })
	img, err := lab.PushImage(ctx, "sigd:pl", filepath.Join(bin, "sigd"))
	require.NoError(t, err)
	state := t.TempDir()
	rt, err := swarmrt.NewWithOptions(lab.Nodes[0].Host, false, swarmrt.Options{StateDir: state, StartTimeout: 90 * time.Second})
	require.NoError(t, err)
	defer rt.Close()
	require.NoError(t, rt.PullImage(ctx, img))
	ref, err := rt.ResolveImage(ctx, img)
	require.NoError(t, err)
	_, err = rt.EnsureNetwork(ctx, core.NetworkSpec{Name: "gordon-pl", Labels: map[string]string{core.LabelManaged: "true"}})
	require.NoError(t, err)
	mk := func(r *swarmrt.Runtime, svc, op string, edit func(*core.ContainerSpec)) string {
		c := core.ContainerSpec{Name: "gordon-pl-" + svc + "-" + op, Image: ref.Ref, Network: "gordon-pl",
			Labels: map[string]string{core.LabelManaged: "true", core.LabelApp: "pl", core.LabelService: svc, core.LabelOp: op},
			Env:    []string{"EXIT_ON=SIGTERM"}, StopGrace: 5 * time.Second}
		edit(&c)
		id, err := r.CreateContainer(ctx, c)
		require.NoError(t, err, c.Name)
		at := time.Now()
		require.NoError(t, r.StartContainer(ctx, id), c.Name)
		t.Logf("%s started in %v on %s", c.Name, time.Since(at).Round(time.Millisecond), nodeOf(ctx, t, lab, id))
		return id
	}
	vol := func(c *core.ContainerSpec) {
		c.Mounts = []core.Mount{{Type: core.MountVolume, Source: "gsr-pl-data", Target: "/data"}}
	}

	// Load on n1 (pinned by node ID), so the first placement avoids it.
	n1ID, err := lab.Docker(ctx, 1, "node", "inspect", "-f", "{{.ID}}", lab.Nodes[0].Name)
	require.NoError(t, err)
	load := mk(rt, "load", "op1", func(c *core.ContainerSpec) { c.Node = n1ID })
	assert.Equal(t, lab.Nodes[0].Name, nodeOf(ctx, t, lab, load), "node = <ID>")

	gen1 := mk(rt, "db", "op1", vol)
	first := nodeOf(ctx, t, lab, gen1)
	assert.Equal(t, lab.Nodes[1].Name, first, "least loaded (n2, n3 idle), lowest hostname")
	assert.Equal(t, first, recordedHost(t, state, "pl/db"), "recorded in placement.json")
	label, err := lab.Docker(ctx, 1, "service", "inspect", "-f", `{{index .Spec.Labels "dev.gordon.node"}} {{.Spec.TaskTemplate.Placement.Constraints}}`, gen1)
	require.NoError(t, err)
	assert.Contains(t, label, "node.id==", "pinned by a node.id constraint: %s", label)
	for _, n := range lab.Nodes {
		vols, err := lab.Docker(ctx, n.Index, "volume", "ls", "-q", "--filter", "name=gsr-pl-data")
		require.NoError(t, err)
		assert.Equal(t, n.Name == first, vols == "gsr-pl-data", "the volume exists on %s only (%s: %q)", first, n.Name, vols)
	}

	// n1 is now the least loaded node; the next generation stays put.
	require.NoError(t, rt.RemoveContainer(ctx, load, true))
	require.NoError(t, rt.RemoveContainer(ctx, gen1, true))
	gen2 := mk(rt, "db", "op2", vol)
	assert.Equal(t, first, nodeOf(ctx, t, lab, gen2), "the second generation lands on the recorded node")

	// Another state directory (another manager's CLI) adopts the label.
	other, err := swarmrt.NewWithOptions(lab.Nodes[0].Host, false, swarmrt.Options{StateDir: t.TempDir()})
	require.NoError(t, err)
	defer other.Close()
	gen3 := mk(other, "db", "op3", vol)
	assert.Equal(t, first, nodeOf(ctx, t, lab, gen3), "adopted from the dev.gordon.node label")
	require.NoError(t, other.RemoveContainer(ctx, gen3, true))

	named := mk(rt, "media", "op1", func(c *core.ContainerSpec) {
		c.Node = lab.Nodes[2].Name
		c.Mounts = []core.Mount{{Type: core.MountBind, Source: lab.Root, Target: "/lab", ReadOnly: true}}
	})
	assert.Equal(t, lab.Nodes[2].Name, nodeOf(ctx, t, lab, named), "node = <hostname>, with a bind mount")
	assert.Equal(t, lab.Nodes[2].Name, recordedHost(t, state, "pl/media"))

	checkPinnedNodeLost(ctx, t, lab, rt, gen2, first)
	t.Logf("test took %v", time.Since(began).Round(time.Millisecond))
}

// checkPinnedNodeLost kills the node instance id is pinned to (host), then
// starts id: the start fails, naming the node, soon after Swarm marks the
// node down; a new instance naming that node is refused at creation.
func checkPinnedNodeLost(ctx context.Context, t *testing.T, lab *Lab, rt *swarmrt.Runtime, id, host string) {
	t.Helper()
	require.NoError(t, rt.StopContainer(ctx, id, 5*time.Second))
	idx := 0
	for _, n := range lab.Nodes {
		if n.Name == host {
			idx = n.Index
		}
	}
	require.NotZero(t, idx)
	killed := time.Now()
	require.NoError(t, lab.KillNode(idx))
	err := rt.StartContainer(ctx, id)
	took := time.Since(killed)
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "pinned to node "+host)
	assert.Contains(t, err.Error(), "bring it back")
	assert.Less(t, took, 45*time.Second, "fails once the node is seen down, not at the 90 s start timeout")
	t.Logf("start on the killed node failed after %v: %v", took.Round(time.Millisecond), err)
	reps, err := lab.Docker(ctx, 1, "service", "inspect", "-f", "{{.Spec.Mode.Replicated.Replicas}}", id)
	require.NoError(t, err)
	assert.Equal(t, "0", reps, "scaled back to 0: the task never starts later on its own")
	_, err = rt.CreateContainer(ctx, core.ContainerSpec{Name: "gordon-pl-late-op1", Image: "x@sha256:" + strings.Repeat("a", 64),
		Network: "gordon-pl", Node: host, Labels: map[string]string{core.LabelApp: "pl", core.LabelService: "late"}})
	require.ErrorIs(t, err, core.ErrUnavailable, "a named node that is down is refused")
	assert.Contains(t, err.Error(), "bring it back")
}

// nodeOf is the hostname of the node running service id's task.
func nodeOf(ctx context.Context, t *testing.T, lab *Lab, id string) string {
	t.Helper()
	out, err := lab.Docker(ctx, 1, "service", "ps", id, "--filter", "desired-state=running", "--format", "{{.Node}}")
	require.NoError(t, err)
	return strings.TrimSpace(out)
}

// recordedHost reads the hostname placement.json records for key.
func recordedHost(t *testing.T, state, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "swarm", "placement.json"))
	require.NoError(t, err)
	var f struct {
		Services map[string]struct {
			NodeID   string `json:"node_id"`
			Hostname string `json:"hostname"`
		} `json:"services"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	require.NotEmpty(t, f.Services[key].NodeID, "%s recorded: %s", key, b)
	return f.Services[key].Hostname
}
