package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// TestS59_BootContinuesAfterAnAppFailure: app bad's bind read fails (binds
// dropped); app good is verified, claimed and persisted; the error is
// aggregated.
func TestS59_BootContinuesAfterAnAppFailure(t *testing.T) {
	h := coretest.NewEngine(t)
	bad := coretest.WebSpec(0)
	bad.HTTP[0].Host = "bad.example.com"
	h.SeedServing("bad", core.AppSpec{Services: []core.ServiceSpec{bad}}, map[string]string{"web": "c-bad"}, map[string]map[int]int{"web": {8080: 32770}})
	good := coretest.WebSpec(0)
	good.HTTP[0].Host = "good.example.com"
	h.SeedServing("good", core.AppSpec{Services: []core.ServiceSpec{good}}, map[string]string{"web": "c-good"}, map[string]map[int]int{"web": {8080: 32776}})
	h.Runtime.SetBinds("c-good", map[int]int{8080: 32777})
	h.Runtime.Fail(coretest.MBinds, "c-bad", errors.New("port map unreadable"), 1)

	reports, err := h.Engine.Boot(h.Ctx())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "app bad")
	assert.NotContains(t, err.Error(), "app good")
	require.Len(t, reports, 2)
	assert.Equal(t, "bad", reports[0].App)
	assert.NotEmpty(t, reports[0].Error)
	assert.Equal(t, engine.BootStarted, reports[1].Action)
	assert.Empty(t, reports[1].Error)

	assert.Empty(t, lcActive(t, h, "bad").Services["web"].BackendBinds, "bad's binds dropped")
	assert.Equal(t, map[int]int{8080: 32777}, lcActive(t, h, "good").Services["web"].BackendBinds)
	assert.Contains(t, lcClaimPorts(h, "c-good"), 32777)
	assert.Equal(t, []int{32777}, h.LastRoute("good", "web"))
	assert.Empty(t, h.LastRoute("bad", "web"))
}

// TestR57_BootStopConvergesStoppedApp: a stopped app's revived container
// is stopped (never removed), nothing is started, pending predecessors are
// not retired.
func TestR57_BootStopConvergesStoppedApp(t *testing.T) {
	h := lcSeedPredecessor(t)
	require.NoError(t, h.Store.SaveIntent(context.Background(), "blog", core.Intent{Stopped: true}))
	h.Reset()
	reports, err := h.Engine.Boot(h.Ctx())
	require.NoError(t, err)
	require.Len(t, reports, 1)
	assert.Equal(t, engine.BootStopped, reports[0].Action)
	assert.Equal(t, []coretest.StopCall{{ID: "c-new", Grace: engine.DefaultStopGrace}}, h.Runtime.Stops())
	assert.Zero(t, h.Runtime.Calls(coretest.MRemove))
	assert.Zero(t, h.Runtime.Calls(coretest.MStart))
	assert.True(t, h.Runtime.Exists("c-new"))
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"), "boot never retires pending predecessors")
	assert.Zero(t, h.Store.Saves("ClaimOp"), "a stopped app claims no op")
}

// TestR57_BootReconcilesInterruptedOpExactlyOnce: a running app with an
// interrupted deploy is reconciled (orphan removed) once, then started.
func TestR57_BootReconcilesInterruptedOpExactlyOnce(t *testing.T) {
	h := lcSeed(t, "c-old", 18080, 0)
	h.Runtime.AddContainer("c-orphan", core.ContainerState{Status: core.StatusRunning}, map[int]int{8080: 18081})
	h.SeedOp(core.Operation{ID: "op-crash", Kind: core.OpDeploy, App: "blog", Steps: []core.Step{
		{ID: engine.StepPreflight, State: core.StepSucceeded},
		{ID: engine.ServiceStepID("web", "replace"), State: core.StepPending, Service: "web", Before: "c-old", After: "c-orphan"},
	}})
	reports, err := h.Engine.Boot(h.Ctx())
	require.NoError(t, err)
	require.Len(t, reports, 1)
	assert.Equal(t, engine.BootStarted, reports[0].Action)
	assert.Equal(t, []string{"remove c-orphan"}, h.Events.Seq("remove"))
	assert.Less(t, h.Events.Index("remove", "c-orphan"), h.Events.Index("binds", "c-old"))
	assert.Zero(t, h.Runtime.Calls(coretest.MStop), "c-old never stopped")
	crashed, ok := h.Store.Op("blog", "op-crash")
	require.True(t, ok)
	assert.Equal(t, core.OutcomeFailed, crashed.Outcome)
	assert.Equal(t, []int{18080}, h.LastRoute("blog", "web"))
	assert.Equal(t, core.OpStart, lcLatest(t, h).Kind)
}

// TestS57_BootNeverRepublishesUnverifiedBinds: the persisted 18081 of an
// interrupted overlap is never routed; the fresh 18090 is.
func TestS57_BootNeverRepublishesUnverifiedBinds(t *testing.T) {
	h := lcSeed(t, "c-new", 18081, 0)
	h.Runtime.SetBinds("c-new", map[int]int{8080: 18090})
	h.Runtime.AddContainer("c-old", core.ContainerState{Status: core.StatusRunning}, map[int]int{8080: 17000})
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-old", Reason: core.MarkerRetirementPending, Operation: "op-crash"})
	h.SeedOp(core.Operation{ID: "op-crash", Kind: core.OpDeploy, App: "blog", Steps: []core.Step{
		{ID: engine.StepPreflight, State: core.StepSucceeded},
		{ID: engine.ServiceStepID("web", "replace"), State: core.StepPending, Service: "web", Before: "c-old", After: "c-new"},
	}})
	_, err := h.Engine.Boot(h.Ctx())
	require.NoError(t, err)
	graphs := h.Traffic.Graphs()
	require.NotEmpty(t, graphs)
	for _, g := range graphs {
		assert.NotContains(t, coretest.HostPorts(g, "blog", "web"), 18081)
	}
	assert.Equal(t, []int{18090}, h.LastRoute("blog", "web"))
	assert.Equal(t, map[int]int{8080: 18090}, lcActive(t, h, "blog").Services["web"].BackendBinds)
	assert.Zero(t, h.Runtime.Calls(coretest.MStop), "c-old not stopped")
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"))
}

// TestS58_BootClearsAReplacementMarkerAndRebuilds: an interrupted stateful
// sequential replacement: the orphan is force-removed, c-old's marker
// cleared, and start rebuilds the missing generation.
func TestS58_BootClearsAReplacementMarkerAndRebuilds(t *testing.T) {
	h := coretest.NewEngine(t)
	spec := core.ServiceSpec{Name: "db", Image: "registry.example/pg:16", TCP: []core.L4Interface{{Port: 5432}},
		Volumes: []core.VolumeMount{{Name: "data", Path: "/var/lib/postgresql/data"}}}
	h.SeedServing("blog", coretest.BlogApp(spec), map[string]string{"db": "c-old"}, map[string]map[int]int{"db": {5432: 17000}})
	h.Runtime.Delete("c-old")
	h.Runtime.AddContainer("c-orphan", core.ContainerState{Status: core.StatusRunning}, map[int]int{5432: 18081})
	h.SeedMarker(core.Marker{App: "blog", Service: "db", Container: "c-old", Reason: core.MarkerReplacementPending, Operation: "op-crash"})
	h.SeedOp(core.Operation{ID: "op-crash", Kind: core.OpDeploy, App: "blog", Steps: []core.Step{
		{ID: engine.StepPreflight, State: core.StepSucceeded},
		{ID: engine.ServiceStepID("db", "replace"), State: core.StepPending, Service: "db", Before: "c-old", After: "c-orphan"},
	}})
	h.Runtime.NextIDs = []string{"c-rebuilt"}
	h.Runtime.NextBinds = []map[int]int{{5432: 18082}}

	reports, err := h.Engine.Boot(h.Ctx())
	require.NoError(t, err)
	require.Len(t, reports, 1)
	require.NotNil(t, reports[0].Start)
	assert.Equal(t, core.OutcomeSuccess, reports[0].Start.Outcome)
	rm := h.Events.Find("remove", "c-orphan")
	require.Len(t, rm, 1)
	assert.Equal(t, "force", rm[0].Detail)
	assert.Less(t, h.Events.Index("remove", "c-orphan"), h.Events.Index("create", "c-rebuilt"))
	assert.Less(t, h.Events.Index("ensure-network", ""), h.Events.Index("create", "c-rebuilt"))
	assert.Less(t, h.Events.Index("ensure-volume", ""), h.Events.Index("create", "c-rebuilt"))
	assert.Equal(t, []string{"create c-rebuilt", "start c-rebuilt"}, h.Events.Seq("create", "start"))
	db := lcActive(t, h, "blog").Services["db"]
	assert.Equal(t, "c-rebuilt", db.Container)
	assert.Equal(t, map[int]int{5432: 18082}, db.BackendBinds)
	assert.Empty(t, h.Store.Markers("blog"))
	crashed, ok := h.Store.Op("blog", "op-crash")
	require.True(t, ok)
	assert.Equal(t, core.OutcomeFailed, crashed.Outcome)
}
