package swarm

import (
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
)

// A stateless instance goes to the usable node holding the fewest
// instances of its generation, then the least loaded, then the lowest
// hostname; down or drained nodes are never chosen; none usable leaves the
// choice to Swarm.
func TestSpreadNode_FewestSiblingsThenLeastLoaded(t *testing.T) {
	nodes := []swarm.Node{
		node("a", "n1", swarm.NodeStateReady, swarm.NodeAvailabilityActive),
		node("b", "n2", swarm.NodeStateReady, swarm.NodeAvailabilityActive),
		node("c", "n3", swarm.NodeStateReady, swarm.NodeAvailabilityActive),
		node("d", "n4", swarm.NodeStateDown, swarm.NodeAvailabilityActive),
		node("e", "n5", swarm.NodeStateReady, swarm.NodeAvailabilityDrain),
	}
	assert.Equal(t, "a", spreadNode(nodes, nil, nil), "ties go to the lowest hostname")
	assert.Equal(t, "b", spreadNode(nodes, map[string]int{"a": 1}, nil), "the fewest siblings")
	assert.Equal(t, "c", spreadNode(nodes, map[string]int{"a": 1, "b": 1}, map[string]int{"c": 9}), "siblings before load")
	assert.Equal(t, "b", spreadNode(nodes, map[string]int{"a": 1, "b": 1, "c": 1}, map[string]int{"a": 5, "b": 2, "c": 3}), "then the least loaded")
	assert.Equal(t, "a", spreadNode(nodes, map[string]int{"b": 1, "c": 1, "d": 0, "e": 0}, nil), "never a down or drained node")
	assert.Equal(t, "", spreadNode(nodes[3:], nil, nil), "no usable node: Swarm places it")
}
