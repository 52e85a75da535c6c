package swarm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func node(id, host string, state swarm.NodeState, avail swarm.NodeAvailability) swarm.Node {
	return swarm.Node{ID: id, Description: swarm.NodeDescription{Hostname: host},
		Status: swarm.NodeStatus{State: state}, Spec: swarm.NodeSpec{Availability: avail}}
}

func labNodes() []swarm.Node {
	return []swarm.Node{
		node("id3", "n3", swarm.NodeStateReady, swarm.NodeAvailabilityActive),
		node("id1", "n1", swarm.NodeStateReady, swarm.NodeAvailabilityActive),
		node("id2", "n2", swarm.NodeStateReady, swarm.NodeAvailabilityActive),
		node("id4", "n0-down", swarm.NodeStateDown, swarm.NodeAvailabilityActive),
		node("id5", "n0-drained", swarm.NodeStateReady, swarm.NodeAvailabilityDrain),
	}
}

// On a swarm: a first placement takes the ready, active node with
// the fewest running gordon-managed tasks; ties go to the lowest
// hostname; a down or drained node is never chosen.
func TestSwarm_FirstPlacementIsTheLeastLoadedReadyActiveNode(t *testing.T) {
	n, err := chooseNode(labNodes(), map[string]int{"id1": 2, "id2": 1, "id3": 1})
	require.NoError(t, err)
	assert.Equal(t, "id2", n.ID, "fewest tasks, then lowest hostname (n2 < n3)")
	n, err = chooseNode(labNodes(), map[string]int{"id1": 0, "id2": 5, "id3": 5})
	require.NoError(t, err)
	assert.Equal(t, "id1", n.ID)
	n, err = chooseNode(labNodes(), nil)
	require.NoError(t, err)
	assert.Equal(t, "id1", n.ID, "no tasks: the lowest hostname of the usable nodes")
	_, err = chooseNode(labNodes()[3:], nil)
	require.ErrorIs(t, err, core.ErrUnavailable, "only a down and a drained node")
}

// A named node is found by hostname or ID; one not in the swarm is
// invalid (listing the nodes), one down or drained is unavailable with
// what to do.
func TestSwarm_NamedNodeMustExistAndBeReady(t *testing.T) {
	for _, name := range []string{"n2", "id2"} {
		n, err := namedNode(labNodes(), name)
		require.NoError(t, err, name)
		assert.Equal(t, "id2", n.ID, name)
	}
	_, err := namedNode(labNodes(), "n9")
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), `node "n9" is not in the swarm (its nodes: n0-down, n0-drained, n1, n2, n3)`)
	_, err = namedNode(labNodes(), "n0-down")
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "node n0-down is down, not ready: bring it back")
	_, err = namedNode(labNodes(), "n0-drained")
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "docker node update --availability active n0-drained")
	dup := append(labNodes(), node("id6", "n1", swarm.NodeStateReady, swarm.NodeAvailabilityActive))
	_, err = namedNode(dup, "n1")
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "set node to the node's ID")
}

// A volume, a bind or a named node makes an instance single-writer; it is
// pinned by a node.id constraint and the dev.gordon.node label.
func TestSwarm_SingleWriterInstancesArePinnedByNodeID(t *testing.T) {
	c := baseSpec()
	assert.False(t, singleWriter(c), "stateless")
	c.Mounts = []core.Mount{{Type: core.MountVolume, Source: "shop-data", Target: "/data"}}
	assert.True(t, singleWriter(c), "volume")
	c.Mounts = nil
	c.Node = "n2"
	assert.True(t, singleWriter(c), "named node")

	s, err := serviceSpec(c)
	require.NoError(t, err)
	pin(&s, "id2")
	assert.Equal(t, []string{"node.id==id2"}, s.TaskTemplate.Placement.Constraints)
	assert.Equal(t, "id2", s.Labels[LabelNode])
	assert.Equal(t, "shop", s.Labels[core.LabelApp], "the instance's labels stay")
}

// A bind mount is refused on an unpinned instance, saying how to pin it;
// with a named node it is mounted (it names a path on that node).
func TestSwarm_BindMountNeedsANamedNode(t *testing.T) {
	c := baseSpec()
	c.Mounts = []core.Mount{{Type: core.MountBind, Source: "/srv/media", Target: "/media", ReadOnly: true}}
	_, err := serviceSpec(c)
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), `pin the service to the node that has the path with node = "<hostname>" (compose: x-gordon.node)`)
	c.Node = "n2"
	s, err := serviceSpec(c)
	require.NoError(t, err)
	assert.Equal(t, []mount.Mount{{Type: mount.TypeBind, Source: "/srv/media", Target: "/media", ReadOnly: true}},
		s.TaskTemplate.ContainerSpec.Mounts)
}

// The placement record: absent is empty; a record is written atomically
// and read back; a corrupt one is an error, never silently empty; no
// state directory records nothing.
func TestSwarm_PlacementRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r := &Runtime{opts: Options{StateDir: dir}}
	f, err := r.readPlacements()
	require.NoError(t, err)
	assert.Empty(t, f.Services)
	unlock, err := r.lockPlacements()
	require.NoError(t, err)
	require.NoError(t, r.record("shop/db", labNodes()[2], "test"))
	unlock()
	f, err = r.readPlacements()
	require.NoError(t, err)
	assert.Equal(t, "id2", f.Services["shop/db"].NodeID)
	assert.Equal(t, "n2", f.Services["shop/db"].Hostname)
	assert.Equal(t, placementVersion, f.Version)
	st, err := os.Stat(filepath.Join(dir, "swarm", "placement.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	require.NoError(t, os.WriteFile(filepath.Join(dir, "swarm", "placement.json"), []byte("{"), 0o600))
	_, err = r.readPlacements()
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "repair or remove it")

	none := &Runtime{}
	require.NoError(t, none.record("shop/db", labNodes()[2], "test"))
	assert.Empty(t, none.placementPath())
}
