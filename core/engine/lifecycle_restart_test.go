package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// R53: restarting an overlap-eligible service is an overlap of the same
// spec. The service is never withdrawn and never restarted in place: a
// candidate on the pinned image is created, started and probed, the
// recorded container gets a retirement-pending marker, ACTIVE names the
// candidate, traffic switches to it, and only then is the old container
// stopped with its own grace and removed; every routed graph has a backend.
func TestR53_RestartOfAnOverlapEligibleServiceIsAnOverlap(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 7*time.Second)
	seeded := lcActive(t, h, "blog").Services["web"]
	h.Runtime.NextIDs = []string{"c-2"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18082}}
	res, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog", Services: []string{"web"}})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)

	assert.Empty(t, h.Withdrawals(), "an overlap never withdraws the serving generation")
	assert.Empty(t, h.Events.Find("restart", "c-1"), "no restart in place")
	order := []int{
		h.Events.Index("create", "c-2"),
		h.Events.Index("start", "c-2"),
		h.Events.Index("ready", "c-2"),
		h.Events.Index("marker-save", "c-1"),
		h.Events.LastIndex("publish-active", "blog"),
		h.Events.Index("traffic", ""),
		h.Events.Index("stop", "c-1"),
		h.Events.Index("remove", "c-1"),
	}
	for i, o := range order {
		require.GreaterOrEqual(t, o, 0, "event %d missing:\n%s", i, h.Events.String())
		if i > 0 {
			require.Less(t, order[i-1], o, "event %d out of order:\n%s", i, h.Events.String())
		}
	}
	for i, g := range h.Traffic.Graphs() {
		assert.NotEmpty(t, g.HTTP, "graph %d routes the host", i)
		for _, r := range g.HTTP {
			assert.NotEmpty(t, r.Backends, "graph %d: the host always has a backend", i)
		}
	}
	assert.Equal(t, []coretest.StopCall{{ID: "c-1", Grace: 7 * time.Second}}, h.Runtime.Stops())
	web := lcActive(t, h, "blog").Services["web"]
	assert.Equal(t, "c-2", web.Container)
	assert.Equal(t, seeded.Image, web.Image, "the pinned image is kept")
	assert.Equal(t, seeded.Digest, web.Digest)
	assert.Equal(t, seeded.EffectiveRevision, web.EffectiveRevision)
	assert.Equal(t, []int{18082}, h.LastRoute("blog", "web"))
	assert.Empty(t, h.Store.Markers("blog"), "the retirement cleared c-1's marker")
	assert.Empty(t, h.Store.ClaimsOf("c-1"))
	r := lcResult(t, res, "web")
	assert.Equal(t, engine.FlowOverlap, r.Flow)
	assert.Equal(t, "c-1", r.Before)
	assert.Equal(t, "c-2", r.After)
	st := lcStep(t, lcLatest(t, h), engine.ServiceStepID("web", "restart"))
	assert.Equal(t, core.StepSucceeded, st.State)
	assert.Equal(t, "c-2", st.After)
}

// R53: when the overlap candidate of a restart fails readiness, it is
// removed and the recorded container keeps serving untouched: no
// withdrawal, no stop, no marker, ACTIVE and routes unchanged.
func TestR53_FailedRestartOverlapLeavesTheOldGenerationServing(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	h.Runtime.NextIDs = []string{"c-2"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18082}}
	h.Prober.Script("c-2", core.ProbeResult{}, errors.New("connection refused"))
	res, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Equal(t, engine.ResultFailed, lcResult(t, res, "web").Result)
	assert.Empty(t, h.Withdrawals())
	assert.Empty(t, h.Runtime.Stops())
	rm := h.Events.Find("remove", "c-2")
	require.Len(t, rm, 1, "the candidate is removed")
	assert.Empty(t, h.Events.Find("remove", "c-1"))
	assert.Empty(t, h.Store.Markers("blog"))
	assert.Equal(t, "c-1", lcActive(t, h, "blog").Services["web"].Container)
	assert.Equal(t, []int{17000}, h.LastRoute("blog", "web"))
}

// R53 + R58: an in-place restart of a single-writer service holds its
// host (no backend, bounded by readiness timeout + grace) instead of
// unrouting it, and the restarted container's route ends the hold.
func TestR58_InPlaceRestartOfASingleWriterServiceHoldsItsHost(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(volumeWeb(coretest.WebSpec(2*time.Second))),
		map[string]string{"web": "c-1"}, map[string]map[int]int{"web": {8080: 17000}})
	h.Runtime.SetBinds("c-1", map[int]int{8080: 17001})
	before := h.Clock.Now()
	_, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	require.Len(t, h.Events.Find("restart", "c-1"), 1, "restarted in place")

	graphs := h.Traffic.Graphs()
	require.Len(t, graphs, 2, "withdraw (held), then route")
	require.Len(t, graphs[0].HTTP, 1)
	held := graphs[0].HTTP[0]
	assert.Empty(t, held.Backends)
	require.NotNil(t, held.Hold, "the host is held, not unrouted")
	assert.Equal(t, before.Add(3*time.Second).UTC(), held.Hold.Until)
	require.Len(t, graphs[1].HTTP, 1)
	assert.Nil(t, graphs[1].HTTP[0].Hold)
	assert.Equal(t, []int{17001}, h.LastRoute("blog", "web"))
	a, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Nil(t, a.Services["web"].HoldUntil)
}

// R58: a failed in-place restart of a single-writer service ends the hold
// at once (held requests get 503 instead of waiting for the bound).
func TestR58_FailedInPlaceRestartEndsTheHold(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(volumeWeb(coretest.WebSpec(0))),
		map[string]string{"web": "c-1"}, map[string]map[int]int{"web": {8080: 17000}})
	h.Prober.Script("c-1", core.ProbeResult{}, errors.New("connection refused"))
	_, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	graphs := h.Traffic.Graphs()
	require.GreaterOrEqual(t, len(graphs), 2)
	require.Len(t, graphs[0].HTTP, 1)
	assert.NotNil(t, graphs[0].HTTP[0].Hold)
	assertUnavailable(t, graphs[len(graphs)-1]) // the hold ended: 503 at once
	a, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Nil(t, a.Services["web"].HoldUntil)
}

// Found by the kill matrix: a restart's overlap killed after it switched to
// its candidate and retired the old container, before the step and the
// verified execution were journaled. The pass keeps routing the candidate
// (ACTIVE names it only after readiness and the switch) while it verifies
// it: no withdrawal, the host never without a route.
func TestR41_RestartOverlapCutShortAfterTheSwitchIsNotWithdrawn(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 7*time.Second)
	h.Runtime.NextIDs = []string{"c-2"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18082}}
	_, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog", Services: []string{"web"}})
	require.NoError(t, err)
	// What the crash left: the step not succeeded, no verified execution.
	op, err := h.Store.LatestOp(h.Ctx(), "blog")
	require.NoError(t, err)
	for i := range op.Steps {
		if op.Steps[i].ID == engine.ServiceStepID("web", "restart") {
			op.Steps[i].State = core.StepFailed
		}
	}
	require.NoError(t, h.Store.SaveOp(h.Ctx(), op))
	rec, err := h.Store.LoadRecovery(h.Ctx(), "blog")
	require.NoError(t, err)
	delete(rec.Verified, "web")
	require.NoError(t, h.Store.SaveRecovery(h.Ctx(), "blog", rec))

	h.Reset()
	require.NoError(t, pass(h))
	assert.Empty(t, h.Withdrawals(), "the candidate the restart switched to keeps its route while the pass verifies it")
	assert.Equal(t, []int{18082}, h.LastRoute("blog", "web"))
}
