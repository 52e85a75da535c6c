package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// lcSeed seeds app "blog" with web → container (binds {8080:port}) and the
// given stop grace.
func lcSeed(t *testing.T, container string, port int, grace time.Duration) *coretest.Harness {
	t.Helper()
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(grace)),
		map[string]string{"web": container}, map[string]map[int]int{"web": {8080: port}})
	return h
}

// lcSeedInPlace is lcSeed with a web service that declares the sequential
// flow (replace = "sequential"): restart restarts it in place (R53).
func lcSeedInPlace(t *testing.T, container string, port int, grace time.Duration) *coretest.Harness {
	t.Helper()
	h := coretest.NewEngine(t)
	spec := coretest.WebSpec(grace)
	spec.Replace = core.ReplaceSequential
	h.SeedServing("blog", coretest.BlogApp(spec), map[string]string{"web": container}, map[string]map[int]int{"web": {8080: port}})
	return h
}

// lcSeedPredecessor seeds SPEC §3.7's "ACTIVE → c-new, marker for c-old":
// c-new serves on 18081; c-old still runs (17000) with a
// retirement-pending marker without grace.
func lcSeedPredecessor(t *testing.T) *coretest.Harness {
	t.Helper()
	h := lcSeed(t, "c-new", 18081, 0)
	h.Runtime.AddContainer("c-old", core.ContainerState{Status: core.StatusRunning, StartedAt: coretest.T0}, map[int]int{8080: 17000})
	require.NoError(t, h.Store.RegisterClaims(context.Background(), []core.Claim{{Port: 17000, Protocol: "tcp", Owner: core.ClaimOwnerBackend, App: "blog", Container: "c-old"}}))
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-old", Reason: core.MarkerRetirementPending, Operation: "op-seed"})
	return h
}

func lcLatest(t *testing.T, h *coretest.Harness) core.Operation {
	t.Helper()
	op, err := h.Store.LatestOp(context.Background(), "blog")
	require.NoError(t, err)
	return op
}

func lcStep(t *testing.T, op core.Operation, id string) core.Step {
	t.Helper()
	s := op.Step(id)
	require.NotNil(t, s, "step %s in %+v", id, op.Steps)
	return *s
}

func lcResult(t *testing.T, res *engine.OpResult, service string) engine.ServiceResult {
	t.Helper()
	require.NotNil(t, res)
	for _, s := range res.Services {
		if s.Service == service {
			return s
		}
	}
	t.Fatalf("no result for %s in %+v", service, res.Services)
	return engine.ServiceResult{}
}

// TestS60_StopRetiresPendingPredecessors: a predecessor whose removal fails
// keeps its marker and fails the service; the next stop retires it.
func TestS60_StopRetiresPendingPredecessors(t *testing.T) {
	h := lcSeedPredecessor(t)
	h.Runtime.Fail(coretest.MRemove, "c-old", errors.New("device busy"), 1)

	res, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "web")
	assert.Equal(t, engine.ResultFailed, lcResult(t, res, "web").Result)
	assert.Contains(t, lcResult(t, res, "web").Error, "superseded container c-old was not retired")
	assert.Equal(t, []string{"stop c-new", "remove c-new", "stop c-old"}, h.Events.Seq("stop", "remove"))
	assert.False(t, h.Runtime.Exists("c-new"))
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"))
	assert.Equal(t, core.OutcomeFailed, lcLatest(t, h).Outcome)

	h.Reset()
	res, err = h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, engine.ResultDeployed, lcResult(t, res, "web").Result)
	assert.Equal(t, []string{"remove c-old"}, h.Events.Seq("remove"), "c-new is already gone (not-found counts as removed)")
	assert.Empty(t, h.Store.Markers("blog"))
	assert.Empty(t, h.Store.ClaimsOf("c-old"))
	a, ok := h.Store.Active("blog")
	require.True(t, ok)
	assert.Equal(t, "c-new", a.Services["web"].Container, "ACTIVE keeps the container ID for start")
	in, err := h.Store.LoadIntent(context.Background(), "blog")
	require.NoError(t, err)
	assert.True(t, in.Stopped)
}

// TestS61_StopMarkerLoadFailureJournaled: an unknown set of pending
// retirements is a journaled failure, and a replay of the key runs nothing.
func TestS61_StopMarkerLoadFailureJournaled(t *testing.T) {
	h := lcSeedPredecessor(t)
	h.Store.FailNext("LoadMarkers", errors.New("markers.json: unexpected EOF"))

	res, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog", OpKey: "key-stop"})
	require.Error(t, err)
	assert.Equal(t, engine.ResultDeployed, lcResult(t, res, "web").Result)
	require.NotEmpty(t, res.Warnings)
	assert.Contains(t, res.Warnings[0].Detail, "pending retirements unknown")
	op := lcLatest(t, h)
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	pr := lcStep(t, op, engine.StepPendingRetire)
	assert.Equal(t, core.StepFailed, pr.State)
	assert.NotEmpty(t, pr.Error)
	require.NotEmpty(t, op.Warnings)
	assert.Contains(t, op.Warnings[0].Detail, "pending retirements unknown")

	replay, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog", OpKey: "key-stop"})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "failed")
	require.NotNil(t, replay)
	assert.True(t, replay.Replayed)
	assert.Equal(t, op.ID, replay.Op.ID)
	assert.Equal(t, 1, h.Runtime.Calls(coretest.MStop), "runtime stop called once in total")
}

// TestR8_StopReplayOfSuccessRunsNothing: a replayed successful key returns
// the stored projection without error and without effects.
func TestR8_StopReplayOfSuccessRunsNothing(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	first, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog", OpKey: "k"})
	require.NoError(t, err)
	h.Reset()
	again, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog", OpKey: "k"})
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Equal(t, first.Op.ID, again.Op.ID)
	assert.Equal(t, core.OutcomeSuccess, again.Outcome)
	assert.Empty(t, h.Events.Seq("stop", "remove", "traffic", "intent-save"))
	// Same key, different verb: a conflict.
	_, err = h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog", OpKey: "k"})
	assert.ErrorIs(t, err, core.ErrConflict)
}

// TestS62_StopTrafficFailureIsTerminal: the final rebuild is rejected.
func TestS62_StopTrafficFailureIsTerminal(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	applies := 0
	h.Traffic.ApplyFn = func(ctx context.Context, g routetable.Graph) error {
		applies++
		if applies == 2 { // 1: withdraw of web, 2: the final rebuild
			return errors.New("edge rejected: " + core.ErrUnavailable.Error())
		}
		return nil
	}
	res, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	assert.Equal(t, core.OutcomeFailed, res.Outcome)
	op := lcLatest(t, h)
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	tp := lcStep(t, op, engine.StepTrafficPublish)
	assert.Equal(t, core.StepFailed, tp.State)
	assert.NotEmpty(t, tp.Error)
}

// TestS63_StopWithoutGraceUsesDefault and S64's stop part.
func TestS63_StopWithoutGraceUsesDefault(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	_, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, []coretest.StopCall{{ID: "c-1", Grace: 30 * time.Second}}, h.Runtime.Stops())
}

// TestS64_DeclaredGraceUsedByStopRemoveRestart: stop and remove stop c-1
// with G; restart restarts with G.
func TestS64_DeclaredGraceUsedByStopRemoveRestart(t *testing.T) {
	const g = 45 * time.Second
	h := lcSeedInPlace(t, "c-1", 17000, g)
	_, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	rs := h.Events.Find("restart", "c-1")
	require.Len(t, rs, 1)
	assert.Equal(t, g.String(), rs[0].Detail)

	_, err = h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, []coretest.StopCall{{ID: "c-1", Grace: g}}, h.Runtime.Stops())

	h2 := lcSeed(t, "c-1", 17000, g)
	_, err = h2.Engine.Remove(h2.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, []coretest.StopCall{{ID: "c-1", Grace: g}}, h2.Runtime.Stops())
}

// TestR50_StopPersistsIntentBeforeRuntimeEffects: the stopped intent and
// the journal precede every stop.
func TestR50_StopPersistsIntentBeforeRuntimeEffects(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	_, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	claim := h.Events.Index("journal-claim", "")
	intent := h.Events.Index("intent-save", "blog")
	stop := h.Events.Index("stop", "c-1")
	require.True(t, claim >= 0 && intent >= 0 && stop >= 0, h.Events.String())
	assert.Less(t, claim, intent)
	assert.Less(t, intent, stop)
	assert.Less(t, h.Events.Index("withdraw", "blog/web"), stop, "withdrawn before stopped")
	op := lcLatest(t, h)
	assert.Equal(t, core.StepSucceeded, lcStep(t, op, engine.StepIntentStopped).State)
	st := lcStep(t, op, engine.ServiceStepID("web", "stop"))
	assert.Equal(t, core.StepSucceeded, st.State)
	assert.Equal(t, "c-1", st.Before)
	assert.Equal(t, "c-1", st.After)
	assert.Empty(t, h.LastRoute("blog", "web"), "nothing routed to a stopped app")
}

// TestR49_LifecycleRefusals: unknown app, a service selection on a
// whole-app verb, and an unfinished op.
func TestR49_LifecycleRefusals(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	_, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "nope"})
	assert.ErrorIs(t, err, core.ErrNotFound)
	_, err = h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog", Services: []string{"web"}})
	assert.ErrorIs(t, err, core.ErrInvalid)
	_, err = h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "nope"})
	assert.ErrorIs(t, err, core.ErrNotFound)
	_, err = h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: ""})
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.Zero(t, h.Runtime.Calls(coretest.MStop))
}
