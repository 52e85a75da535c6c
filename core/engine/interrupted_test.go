package engine_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
)

// interruptedDeploy is a non-terminal deploy op: preflight succeeded, the
// web step in state with Before/After.
func interruptedDeploy(state core.StepState, before, after string) core.Operation {
	return core.Operation{ID: "op-1", Kind: core.OpDeploy, App: "blog", Revision: "rev-1", StartedAt: coretest.T0,
		Steps: []core.Step{
			{ID: "preflight", State: core.StepSucceeded},
			{ID: "service.web.replace", State: state, Service: "web", Before: before, After: after},
		}}
}

func loadOp(t *testing.T, h *coretest.Harness, id string) core.Operation {
	t.Helper()
	op, ok := h.Store.Op("blog", id)
	require.True(t, ok)
	return op
}

// TestS55_ReconcileRemovesUnpublishedOverlapCandidate: the orphan is
// force-removed (never started), c-old untouched, the op terminal with the
// step failed ("unpublished candidate was removed"), ACTIVE still c-old at
// rev-0, and traffic never touched (R45).
func TestS55_ReconcileRemovesUnpublishedOverlapCandidate(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.AddContainer("c-orphan", core.ContainerState{}, map[int]int{8080: 18081})
	h.SeedOp(interruptedDeploy(core.StepPending, "c-old", "c-orphan"))

	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))

	rm := h.Events.Find("remove", "c-orphan")
	require.Len(t, rm, 1)
	assert.Equal(t, "force", rm[0].Detail)
	assert.False(t, h.Runtime.Exists("c-orphan"))
	for _, kind := range []string{"stop", "remove", "restart", "create", "start"} {
		assert.Equal(t, -1, h.Events.Index(kind, "c-old"), "c-old never %s", kind)
	}
	assert.Equal(t, -1, h.Events.Index("start", "c-orphan"))
	assert.Equal(t, -1, h.Events.Index("restart", "c-orphan"))
	assert.True(t, h.Runtime.Running("c-old"))
	assert.Equal(t, 0, h.Traffic.Attempts())
	assert.Equal(t, -1, h.Events.Index("withdraw", ""))

	op := loadOp(t, h, "op-1")
	assert.True(t, op.Terminal())
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	st := op.Step("service.web.replace")
	require.NotNil(t, st)
	assert.Equal(t, core.StepFailed, st.State)
	assert.Contains(t, st.Error, "unpublished candidate was removed")
	assert.Empty(t, st.After, "full success clears After")
	assert.Contains(t, st.Detail, "c-orphan")
	assert.Equal(t, "c-old", st.Before)

	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.Equal(t, "rev-0", a.Services["web"].EffectiveRevision)
	assert.Equal(t, 0, h.Store.Saves("SaveActive"))
	assert.NotEmpty(t, h.Store.ClaimsOf("c-old"))
}

// TestR47_UnpublishedOverlapCandidateDropsBeforeMarker: an unpublished
// candidate means Before still serves, so its retirement-pending marker is
// stale and cleared (R28).
func TestR47_UnpublishedOverlapCandidateDropsBeforeMarker(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.AddContainer("c-orphan", core.ContainerState{}, nil)
	h.SeedMarker(retirementMarker("c-old", 0))
	h.SeedOp(interruptedDeploy(core.StepPending, "c-old", "c-orphan"))
	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	assert.Empty(t, h.Store.Markers("blog"))
	assert.True(t, h.Runtime.Running("c-old"))
	assert.Empty(t, h.Runtime.Stops())
}

// TestS58_ReconcileClearsReplacementMarker: interrupted stateful sequential
// replacement (c-old gone and marked, c-orphan journaled) → c-orphan
// force-removed, c-old's replacement-pending marker cleared.
func TestS58_ReconcileClearsReplacementMarker(t *testing.T) {
	h := coretest.NewEngine(t)
	db := core.ServiceSpec{Name: "web", Image: "postgres:16", TCP: []core.L4Interface{{Port: 5432}},
		Volumes: []core.VolumeMount{{Name: "data", Path: "/var/lib/postgresql/data"}}}
	h.SeedServing("blog", coretest.BlogApp(db), map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {5432: 17000}})
	h.Runtime.Delete("c-old")
	h.Runtime.AddContainer("c-orphan", core.ContainerState{}, map[int]int{5432: 18082})
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-old", Reason: core.MarkerReplacementPending, Operation: "op-1"})
	h.SeedOp(interruptedDeploy(core.StepPending, "c-old", "c-orphan"))

	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))

	assert.Equal(t, "force", h.Events.Find("remove", "c-orphan")[0].Detail)
	assert.False(t, h.Runtime.Exists("c-orphan"))
	assert.Empty(t, h.Store.Markers("blog"))
	assert.False(t, h.Runtime.Running("c-old"))
	assert.Equal(t, 0, h.Traffic.Attempts())
	op := loadOp(t, h, "op-1")
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	assert.Contains(t, op.Step("service.web.replace").Error, "unpublished candidate was removed")
}

// TestR47_OrphanThatCannotBeRemovedFailsClosed: the op stays non-terminal
// (R7 then refuses later mutations), the step is failed with the retirement
// detail, the warning names the orphan, the error wraps ErrConflict. Once
// the runtime cooperates, the next reconciliation converges and finalizes.
func TestR47_OrphanThatCannotBeRemovedFailsClosed(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.AddContainer("c-orphan", core.ContainerState{}, nil)
	h.SeedMarker(retirementMarker("c-old", 0))
	h.SeedOp(interruptedDeploy(core.StepPending, "c-old", "c-orphan"))
	h.Runtime.Fail(coretest.MRemove, "c-orphan", errors.New("driver failed to remove root filesystem"), 1)

	err := h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", "")
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "c-orphan")
	assert.Contains(t, err.Error(), "docker rm -f")

	op := loadOp(t, h, "op-1")
	assert.False(t, op.Terminal(), "saved unfinalized")
	st := op.Step("service.web.replace")
	assert.Equal(t, core.StepFailed, st.State)
	assert.Contains(t, st.Error, "could not be removed")
	assert.Contains(t, st.Error, "driver failed to remove root filesystem")
	assert.Equal(t, "c-orphan", st.After, "still authoritative")
	require.Len(t, op.Warnings, 1)
	assert.Equal(t, "c-orphan", op.Warnings[0].Leftover)
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"), "markers untouched while failing closed")
	assert.True(t, h.Runtime.Exists("c-orphan"))
	latest, lerr := h.Store.LatestOp(h.Ctx(), "blog")
	require.NoError(t, lerr)
	assert.Equal(t, "op-1", latest.ID)

	// Retry: removal now works.
	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	op = loadOp(t, h, "op-1")
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	assert.Contains(t, op.Step("service.web.replace").Error, "unpublished candidate was removed")
	assert.Empty(t, op.Step("service.web.replace").After)
	assert.False(t, h.Runtime.Exists("c-orphan"))
	assert.Empty(t, h.Store.Markers("blog"))
}

// TestS57_PublishedCandidateKeptWithRetirementMarker: ACTIVE names the
// candidate → kept, step failed with the interrupted-before-publication
// text, detail records it, Before's retirement-pending marker kept (R43
// retires it), no traffic (R45).
func TestS57_PublishedCandidateKeptWithRetirementMarker(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-new"},
		map[string]map[int]int{"web": {8080: 18081}})
	h.Runtime.AddContainer("c-old", core.ContainerState{}, map[int]int{8080: 17000})
	h.SeedMarker(retirementMarker("c-old", 0))
	h.SeedOp(interruptedDeploy(core.StepPending, "c-old", "c-new"))

	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))

	assert.True(t, h.Runtime.Running("c-new"))
	assert.True(t, h.Runtime.Running("c-old"))
	assert.Empty(t, h.Runtime.Stops())
	assert.Equal(t, 0, h.Runtime.Calls(coretest.MRemove))
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"))
	assert.Equal(t, 0, h.Traffic.Attempts())
	op := loadOp(t, h, "op-1")
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	st := op.Step("service.web.replace")
	assert.Equal(t, core.StepFailed, st.State)
	assert.Contains(t, st.Error, "interrupted before traffic publication")
	assert.Contains(t, st.Error, "routing will be republished")
	assert.Contains(t, st.Detail, "published container c-new kept")
	a, _ := h.Store.Active("blog")
	assert.Equal(t, map[int]int{8080: 18081}, a.Services["web"].BackendBinds, "persisted binds untouched")
}

// TestR47_PublishedSequentialCandidateClearsBlockingMarker: a published
// candidate whose Before carries replacement-pending → that stale marker
// is cleared.
func TestR47_PublishedSequentialCandidateClearsBlockingMarker(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-new"},
		map[string]map[int]int{"web": {8080: 18081}})
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-old", Reason: core.MarkerReplacementPending})
	h.SeedOp(interruptedDeploy(core.StepPending, "c-old", "c-new"))
	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	assert.Empty(t, h.Store.Markers("blog"))
	assert.True(t, h.Runtime.Running("c-new"))
}

// TestR48_FinalizeSuccessWhenOnlyOutcomeWasLost: every step succeeded →
// outcome success, nothing removed (ACTIVE names c-new).
func TestR48_FinalizeSuccessWhenOnlyOutcomeWasLost(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-new"},
		map[string]map[int]int{"web": {8080: 18081}})
	h.SeedOp(interruptedDeploy(core.StepSucceeded, "c-old", "c-new"))
	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	op := loadOp(t, h, "op-1")
	assert.Equal(t, core.OutcomeSuccess, op.Outcome)
	assert.False(t, op.FinishedAt.IsZero())
	assert.Equal(t, "c-new", op.Step("service.web.replace").After, "a succeeded step keeps its After")
	assert.Equal(t, core.StepSucceeded, op.Step("service.web.replace").State)
	assert.True(t, h.Runtime.Running("c-new"))
	assert.Equal(t, 0, h.Runtime.Calls(coretest.MRemove))
	assert.Equal(t, 1, h.Store.Saves("SaveOp"))
}

// TestR48_FinalizeFailedWithoutLoadingActive: a pending step without After
// finalizes the op as failed; ACTIVE is never loaded (R46).
func TestR48_FinalizeFailedWithoutLoadingActive(t *testing.T) {
	h := seedWeb(t, 0)
	op := interruptedDeploy(core.StepPending, "", "")
	op.Steps = op.Steps[:1]
	op.Steps[0].State = core.StepPending
	h.SeedOp(op)
	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	assert.Equal(t, core.OutcomeFailed, loadOp(t, h, "op-1").Outcome)
	assert.Equal(t, 0, h.Store.Calls("LoadActive"))
	assert.Equal(t, 0, h.Store.Calls("LoadMarkers"))
}

// TestR45_LiveOpAndNoOpAreSkipped: the op live in this process is not
// reconciled; an app without ops has nothing to do.
func TestR45_LiveOpAndNoOpAreSkipped(t *testing.T) {
	h := seedWeb(t, 0)
	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", "op-1"))
	h.Runtime.AddContainer("c-new", core.ContainerState{}, nil)
	h.SeedOp(interruptedDeploy(core.StepPending, "c-old", "c-new"))
	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", "op-1"))
	assert.Empty(t, h.Events.List())
	assert.True(t, h.Runtime.Exists("c-new"))
	live := loadOp(t, h, "op-1")
	assert.False(t, live.Terminal())
	// Another process's view (different live op) does reconcile it.
	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", "op-9"))
	assert.False(t, h.Runtime.Exists("c-new"))
}

// TestR46_TerminalOpRetriesFailedCleanupOnce: a terminal op's failed step
// with a leftover candidate (S13) is force-removed; the op keeps its
// outcome and is re-saved only when something changed.
func TestR46_TerminalOpRetriesFailedCleanupOnce(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.AddContainer("c-new", core.ContainerState{}, nil)
	op := interruptedDeploy(core.StepFailed, "c-old", "c-new")
	op.Steps[1].Error = "service web: readiness: timeout"
	op.Outcome = core.OutcomeFailed
	h.SeedOp(op)

	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	got := loadOp(t, h, "op-1")
	assert.Equal(t, core.OutcomeFailed, got.Outcome)
	st := got.Step("service.web.replace")
	assert.Equal(t, "service web: readiness: timeout", st.Error, "terminal step keeps its error")
	assert.Contains(t, st.Detail, "c-new")
	assert.Empty(t, st.After)
	assert.False(t, h.Runtime.Exists("c-new"))
	assert.True(t, h.Runtime.Running("c-old"))
	assert.Equal(t, 1, h.Store.Saves("SaveOp"))

	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	assert.Equal(t, 1, h.Store.Saves("SaveOp"), "nothing changed, nothing saved")
}

// TestR47_MarkerClearFailureKeepsStepEligible: a failed clear becomes a
// journal warning, the op is finalized, After stays; the next
// reconciliation clears the marker and the After.
func TestR47_MarkerClearFailureKeepsStepEligible(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.AddContainer("c-orphan", core.ContainerState{}, nil)
	h.SeedMarker(retirementMarker("c-old", 0))
	h.SeedOp(interruptedDeploy(core.StepPending, "c-old", "c-orphan"))
	h.Store.FailNext("ClearMarker", errors.New("markers.json: read-only file system"))

	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	op := loadOp(t, h, "op-1")
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	assert.Equal(t, "c-orphan", op.Step("service.web.replace").After)
	require.Len(t, op.Warnings, 1)
	assert.Equal(t, "c-old", op.Warnings[0].Leftover)
	assert.Contains(t, op.Warnings[0].Detail, "clear recovery inhibition")
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"))

	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	op = loadOp(t, h, "op-1")
	assert.Empty(t, op.Step("service.web.replace").After)
	assert.Empty(t, h.Store.Markers("blog"))
	assert.Len(t, op.Warnings, 1, "warnings are not duplicated")
	assert.True(t, h.Runtime.Running("c-old"))
}

// TestR45_StoreErrorsAreReturned: a latest-op load failure aborts.
func TestR45_StoreErrorsAreReturned(t *testing.T) {
	h := seedWeb(t, 0)
	h.Store.FailNext("LatestOp", errors.New("ops/LATEST torn"))
	err := h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ops/LATEST torn")
	assert.Contains(t, err.Error(), "blog")
}
