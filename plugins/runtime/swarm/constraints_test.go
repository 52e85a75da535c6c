package swarm

import (
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func labNode(id, host string, role swarm.NodeRole, labels map[string]string) swarm.Node {
	n := swarm.Node{ID: id}
	n.Description.Hostname = host
	n.Description.Platform.OS = "linux"
	n.Spec.Role = role
	n.Spec.Labels = labels
	n.Spec.Availability = swarm.NodeAvailabilityActive
	n.Status.State = swarm.NodeStateReady
	return n
}

// Placement constraints on a swarm: the instance's service carries them,
// and the runtime's own choice of node (spread, a single-writer's node)
// only picks nodes that satisfy all of them; none satisfying is an error
// that says what to change.
func TestSwarm_PlacementConstraintsOnEveryInstance(t *testing.T) {
	c := baseSpec()
	c.Labels[core.LabelPlacement] = "node.role==worker\nnode.labels.zone!=b"
	s, err := serviceSpec(c)
	require.NoError(t, err)
	require.NotNil(t, s.TaskTemplate.Placement)
	assert.Equal(t, []string{"node.role==worker", "node.labels.zone!=b"}, s.TaskTemplate.Placement.Constraints)

	nodes := []swarm.Node{
		labNode("m1", "n1", swarm.NodeRoleManager, nil),
		labNode("w2", "n2", swarm.NodeRoleWorker, map[string]string{"zone": "b"}),
		labNode("w3", "n3", swarm.NodeRoleWorker, map[string]string{"zone": "A"}),
	}
	fit := satisfying(nodes, placementOf(c))
	require.Len(t, fit, 1)
	assert.Equal(t, "w3", fit[0].ID)
	assert.True(t, satisfies(nodes[2], []string{"node.labels.zone==a", "node.platform.os==linux", "node.hostname==n3"}), "values compare without case")
	assert.False(t, satisfies(nodes[2], []string{"node.labels.rack==1"}), "an absent label is not equal")
	assert.True(t, satisfies(nodes[2], []string{"node.labels.rack!=1"}))
	assert.Len(t, satisfying(nodes, nil), 3)
	assert.Equal(t, "w3", spreadNode(fit, nil, nil))

	c.Labels[core.LabelPlacement] = "node.labels.gpu==yes"
	require.Empty(t, satisfying(nodes, placementOf(c)))
	assert.ErrorContains(t, unplaceable(c), "node.labels.gpu==yes")
	assert.ErrorIs(t, unplaceable(c), core.ErrUnavailable)
}
