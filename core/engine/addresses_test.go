package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// addressOnStart gives container id the address ip on network when it is
// started, as the Docker runtime reports a container's IP once it runs.
func addressOnStart(h *coretest.Harness, id, network, ip string) {
	h.Runtime.Hook = func(_ context.Context, method, cid string) error {
		if method == coretest.MStart && cid == id {
			h.Runtime.SetAddress(id, network, ip)
		}
		return nil
	}
}

func TestR18_DeployProbesAndRoutesTheCandidateAtItsAppNetworkAddress(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	addressOnStart(h, "c-new", "gordon-blog", "10.88.0.7")
	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)

	assert.Equal(t, []string{"10.88.0.7:8080"}, coretest.BackendAddrs(h.Traffic.Last()), "the edge dials the container's address")
	assert.Contains(t, h.Prober.Addresses(), "10.88.0.7:8080", "readiness dials the address the edge will dial")
	a, err := h.Store.LoadActive(context.Background(), "blog")
	require.NoError(t, err)
	web := a.Services["web"]
	assert.Equal(t, "c-new", web.Container)
	assert.Equal(t, "10.88.0.7", web.IP)
	assert.Equal(t, "gordon-blog", web.Network)
	assert.Equal(t, map[int]int{8080: 8080}, web.BackendBinds)
	claims, err := h.Store.ListClaims(context.Background())
	require.NoError(t, err)
	for _, c := range claims {
		assert.NotEqual(t, "c-new", c.Container, "an address holds no host port, so it claims none: %+v", c)
	}
}

func TestR18_AnAddressOutsideTheAppNetworkIsNeverRouted(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	addressOnStart(h, "c-new", "gordon-shop", "10.89.0.7")
	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `on network "gordon-shop", not the app's network gordon-blog`)
	for _, g := range h.Traffic.Graphs() {
		assert.NotContains(t, coretest.BackendAddrs(g), "10.89.0.7:8080", "never routed")
	}
	a, err := h.Store.LoadActive(context.Background(), "blog")
	require.NoError(t, err)
	assert.Equal(t, "c-old", a.Services["web"].Container, "the old generation keeps serving")
}

// On a swarm the edge reaches every app's instances on one shared
// overlay (Engine.EdgeNetwork): an address there is routed, one on
// another app's network still never is.
func TestR18_AnAddressOnTheEdgeNetworkIsRoutedAndAnotherAppsNetworkStillIsNot(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Engine.EdgeNetwork = "gordon-edge"
	h.Runtime.NextIDs = []string{"c-new"}
	addressOnStart(h, "c-new", "gordon-edge", "10.101.1.7")
	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)
	assert.Equal(t, []string{"10.101.1.7:8080"}, coretest.BackendAddrs(h.Traffic.Last()), "the edge dials the instance on the edge network")

	h2 := depSeedWeb(t, coretest.WebSpec(0))
	h2.Engine.EdgeNetwork = "gordon-edge"
	h2.Runtime.NextIDs = []string{"c-new"}
	addressOnStart(h2, "c-new", "gordon-shop", "10.89.0.7")
	_, err = depDeploy(t, h2, engine.DeployRequest{}, depNewWeb(0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `on network "gordon-shop", not the app's network gordon-blog`)
}

func TestR41_PassRoutesAnInstanceRevivedAtANewAddressThereAndNeverAtItsOldOne(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-web"}, map[string]map[int]int{"web": {8080: 18081}})
	h.Runtime.SetAddress("c-web", "gordon-blog", "10.88.0.5")
	require.NoError(t, pass(h))
	require.Equal(t, []string{"10.88.0.5:8080"}, coretest.BackendAddrs(h.Traffic.Last()))

	// The engine's restart policy revives the container: a new execution
	// at a new address; its old address may now be another container's.
	h.Runtime.SetAddress("c-web", "gordon-blog", "10.88.0.9")
	h.Runtime.SetState("c-web", core.StatusRunning, coretest.T0.Add(time.Minute))
	graphs, probes := len(h.Traffic.Graphs()), len(h.Prober.Addresses())
	require.NoError(t, pass(h))
	for _, g := range h.Traffic.Graphs()[graphs:] {
		assert.NotContains(t, coretest.BackendAddrs(g), "10.88.0.5:8080", "the old address is withdrawn, never routed again")
	}
	assert.Equal(t, []string{"10.88.0.9:8080"}, coretest.BackendAddrs(h.Traffic.Last()))
	assert.Equal(t, []string{"10.88.0.9:8080"}, h.Prober.Addresses()[probes:], "the new execution is probed at its new address")
	a, err := h.Store.LoadActive(context.Background(), "blog")
	require.NoError(t, err)
	assert.Equal(t, "10.88.0.9", a.Services["web"].IP)
}

func TestR41_ReplicaAtANewAddressIsReprobedAndRoutedThere(t *testing.T) {
	h := coretest.NewEngine(t)
	spec := coretest.WebSpec(0)
	spec.Replicas = 2
	h.SeedServing("blog", coretest.BlogApp(spec), map[string]string{"web": "c-a"}, map[string]map[int]int{"web": {8080: 18081}})
	h.Runtime.AddContainer("c-b", core.ContainerState{Status: core.StatusRunning, StartedAt: coretest.T0}, map[int]int{8080: 18082})
	h.Runtime.SetAddress("c-a", "gordon-blog", "10.88.0.5")
	h.Runtime.SetAddress("c-b", "gordon-blog", "10.88.0.6")
	a, err := h.Store.LoadActive(context.Background(), "blog")
	require.NoError(t, err)
	a.Services["web"].Replicas = []core.Instance{{Container: "c-b", BackendBinds: map[int]int{8080: 18082}}}
	require.NoError(t, h.Store.SaveActive(context.Background(), a))

	require.NoError(t, pass(h))
	assert.ElementsMatch(t, []string{"10.88.0.5:8080", "10.88.0.6:8080"}, coretest.BackendAddrs(h.Traffic.Last()))
	a, err = h.Store.LoadActive(context.Background(), "blog")
	require.NoError(t, err)
	require.Len(t, a.Services["web"].Replicas, 1)
	assert.Equal(t, "10.88.0.6", a.Services["web"].Replicas[0].IP)
	assert.Contains(t, h.Prober.Addresses(), "10.88.0.6:8080", "the replica's new endpoint is probed before it is routed")
}
