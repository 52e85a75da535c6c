package swarm

import (
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
)

// Isolation on a swarm: the edge's admin address is its address on the
// control network only (never one on an app's network it joins), the
// edge joins every app's overlay without that being a change of its
// settings (the spec hash is the same), and a service missing one of
// them is not "already running".
func TestEdgeSpec_AdminOnTheControlNetworkAndEveryAppNetworkJoined(t *testing.T) {
	e := EdgeService{Config: Config{Network: "gordon-edge", Service: "gordon-edge", AdminPort: 9180, HTTPPort: 80, ControlSubnet: "10.0.9.0/24"}}
	s := edgeSpec(e)
	assert.Contains(t, s.TaskTemplate.ContainerSpec.Args, "10.0.9.0/24:9180", "the admin binds inside the control subnet")
	hash := s.Labels[labelConfig]

	running := []swarm.NetworkAttachmentConfig{{Target: "ctlid"}, {Target: "shopid"}}
	all := withAppNetworks(&s, running, []string{"blogid", "shopid"})
	assert.False(t, all, "blog's network is not joined yet: the service is updated")
	assert.Equal(t, []swarm.NetworkAttachmentConfig{{Target: "gordon-edge"}, {Target: "blogid"}, {Target: "shopid"}}, s.TaskTemplate.Networks)
	assert.Equal(t, hash, s.Labels[labelConfig], "joining an app's network is no change of the edge's settings")

	s = edgeSpec(e)
	running = append(running, swarm.NetworkAttachmentConfig{Target: "blogid"})
	assert.True(t, withAppNetworks(&s, running, []string{"blogid", "shopid"}))
}
