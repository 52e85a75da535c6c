package engine_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// seedInterruptedSequential seeds a volume service db serving c-old at
// rev-0, then the state a kill -9 leaves after the sequential replacement
// removed c-old: c-old gone, its replacement-pending marker, and op-crash
// non-terminal with the db step pending (Before c-old, After after).
func seedInterruptedSequential(t *testing.T, after string) *coretest.Harness {
	h := coretest.NewEngine(t)
	spec := core.ServiceSpec{Name: "db", Image: "registry.example/pg:16", TCP: []core.L4Interface{{Port: 5432, Publish: "0.0.0.0:15432"}},
		Volumes:   []core.VolumeMount{{Name: "data", Path: "/var/lib/postgresql/data"}},
		Readiness: core.Readiness{Type: core.ReadinessTCP, Port: 5432, Timeout: core.Duration(time.Second)}}
	h.SeedServing("blog", coretest.BlogApp(spec), map[string]string{"db": "c-old"}, map[string]map[int]int{"db": {5432: 17000}})
	h.Runtime.Delete("c-old")
	h.SeedMarker(core.Marker{App: "blog", Service: "db", Container: "c-old", Reason: core.MarkerReplacementPending, Operation: "op-crash"})
	h.SeedOp(core.Operation{ID: "op-crash", Kind: core.OpDeploy, App: "blog", Revision: "rev-1", StartedAt: coretest.T0, Steps: []core.Step{
		{ID: engine.StepPreflight, State: core.StepSucceeded},
		{ID: engine.ServiceStepID("db", "replace"), State: core.StepPending, Service: "db", Before: "c-old", After: after},
	}})
	h.Runtime.NextIDs = []string{"c-rebuilt"}
	h.Runtime.NextBinds = []map[int]int{{5432: 18082}}
	return h
}

// workloadLabels are the labels a candidate of blog/db created by op carries.
// incarnationOf is app's incarnation in h's store (the label every
// container this state directory creates for it carries).
func incarnationOf(t *testing.T, h *coretest.Harness, app string) string {
	t.Helper()
	info, err := h.Store.LoadApp(h.Ctx(), app)
	require.NoError(t, err)
	return info.Incarnation
}

func workloadLabels(op string) map[string]string {
	return map[string]string{core.LabelManaged: "true", core.LabelApp: "blog", core.LabelService: "db",
		core.LabelOp: op, core.LabelRole: "workload"}
}

// assertRebuiltAndRouted checks the end state of a rolled-back sequential
// replacement: exactly one container (c-rebuilt) that ACTIVE names and the
// edge routes, no marker, no Rebuild entry, the crashed op failed and the
// latest op a successful start that journaled c-rebuilt.
func assertRebuiltAndRouted(t *testing.T, h *coretest.Harness) {
	t.Helper()
	assert.Equal(t, []string{"c-rebuilt"}, h.Runtime.Containers(), "exactly one generation")
	assert.True(t, h.Runtime.Running("c-rebuilt"))
	db := lcActive(t, h, "blog").Services["db"]
	assert.Equal(t, "c-rebuilt", db.Container)
	assert.Equal(t, "rev-0", db.EffectiveRevision, "rolled back to the pinned revision")
	assert.Equal(t, []int{18082}, h.LastRoute("blog", "db"))
	assert.Empty(t, h.Store.Markers("blog"))
	rec, err := h.Store.LoadRecovery(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Empty(t, rec.Rebuild)
	assert.Equal(t, "c-rebuilt", rec.Verified["db"].Container, "the rebuilt execution is verified")
	crashed, ok := h.Store.Op("blog", "op-crash")
	require.True(t, ok)
	assert.Equal(t, core.OutcomeFailed, crashed.Outcome)
	latest, err := h.Store.LatestOp(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, core.OpStart, latest.Kind)
	assert.Equal(t, core.OutcomeSuccess, latest.Outcome)
	st := latest.Step(engine.ServiceStepID("db", "start"))
	require.NotNil(t, st)
	assert.Equal(t, "c-old", st.Before)
	assert.Equal(t, "c-rebuilt", st.After)
}

// TestR47_InterruptedSequentialReplacementRolledBackByReconcile: a kill
// after the sequential flow removed c-old and journaled c-orphan: one
// reconcile pass removes the orphan and rebuilds the service from ACTIVE's
// pinned revision, verifies and routes it, with no error.
func TestR47_InterruptedSequentialReplacementRolledBackByReconcile(t *testing.T) {
	h := seedInterruptedSequential(t, "c-orphan")
	h.Runtime.AddContainer("c-orphan", core.ContainerState{Status: core.StatusCreated, Labels: workloadLabels("op-crash")}, nil)

	reports, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	require.Len(t, reports, 1)
	assert.Equal(t, []string{"db"}, reports[0].Verified)
	assert.Equal(t, "force", h.Events.Find("remove", "c-orphan")[0].Detail)
	assert.Less(t, h.Events.Index("remove", "c-orphan"), h.Events.Index("create", "c-rebuilt"))
	assertRebuiltAndRouted(t, h)
	rec, err := h.Store.LoadRecovery(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Contains(t, rec.Events["db"].Reason, "interrupted replacement", "status shows why it was rebuilt")
}

// TestR47_UnjournaledCandidateRemovedAndReplacementRolledBack: the kill
// came between the runtime's create and the journal save, so no step names
// the candidate (status `created`). Reconciliation finds it by its op
// label, removes it, says so in the step, and the pass rebuilds the
// service.
func TestR47_UnjournaledCandidateRemovedAndReplacementRolledBack(t *testing.T) {
	h := seedInterruptedSequential(t, "")
	h.Runtime.AddContainer("c-unjournaled", core.ContainerState{Status: core.StatusCreated, Labels: workloadLabels("op-crash")}, nil)

	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.Equal(t, "force", h.Events.Find("remove", "c-unjournaled")[0].Detail)
	crashed, _ := h.Store.Op("blog", "op-crash")
	st := crashed.Step(engine.ServiceStepID("db", "replace"))
	require.NotNil(t, st)
	assert.Contains(t, st.Error, "before it was journaled")
	assert.NotContains(t, st.Error, "before a candidate was created")
	assert.Contains(t, st.Detail, "c-unjournaled")
	assertRebuiltAndRouted(t, h)
}

// TestR47_FailedRebuildIsRetriedByTheNextPass: the rebuild's candidate
// does not become ready: the pass fails (naming the interrupted
// replacement), journals a failed start op, keeps the Rebuild entry; the
// next pass rebuilds.
func TestR47_FailedRebuildIsRetriedByTheNextPass(t *testing.T) {
	h := seedInterruptedSequential(t, "")
	h.Runtime.NextIDs = []string{"c-bad", "c-rebuilt"}
	h.Runtime.NextBinds = []map[int]int{{5432: 18081}, {5432: 18082}}
	h.Prober.SetResult("c-bad", false, "connection refused")

	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "interrupted replacement")
	assert.False(t, h.Runtime.Exists("c-bad"), "the failed candidate is removed")
	rec, _ := h.Store.LoadRecovery(h.Ctx(), "blog")
	assert.Equal(t, "c-old", rec.Rebuild["db"], "kept for the next pass")
	latest, _ := h.Store.LatestOp(h.Ctx(), "blog")
	assert.Equal(t, core.OutcomeFailed, latest.Outcome)

	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.Equal(t, []string{"c-rebuilt"}, h.Runtime.Containers())
	assert.Equal(t, []int{18082}, h.LastRoute("blog", "db"))
}

// TestR41_GoneContainerNotRemovedByTheEngineIsNotRebuilt: a container that
// disappeared without an interrupted replacement of ours (docker rm) is
// still only withdrawn: the pass never creates it back (R39).
func TestR41_GoneContainerNotRemovedByTheEngineIsNotRebuilt(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.Delete("c-old")
	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is gone")
	assert.Zero(t, h.Runtime.Calls(coretest.MCreate))
}

// TestR43_PassRemovesContainersNoRecordOwns: a workload container labelled
// for the app that neither ACTIVE, a marker nor an unfinished op names is
// force-removed by the pass; the serving one is untouched.
func TestR43_PassRemovesContainersNoRecordOwns(t *testing.T) {
	h := seedWeb(t, 0)
	lb := workloadLabels("op-gone")
	lb[core.LabelService] = "web"
	lb[core.LabelIncarnation] = incarnationOf(t, h, "blog")
	h.Runtime.AddContainer("c-stray", core.ContainerState{Status: core.StatusCreated, Labels: lb}, nil)
	other := workloadLabels("op-x")
	other[core.LabelApp] = "shop"
	h.Runtime.AddContainer("c-other-app", core.ContainerState{Status: core.StatusRunning, Labels: other}, nil)
	// The same app name deployed from another state directory: another
	// incarnation, not provably ours.
	foreign := workloadLabels("op-y")
	foreign[core.LabelService], foreign[core.LabelIncarnation] = "web", "inc-of-another-state-dir"
	h.Runtime.AddContainer("c-same-name", core.ContainerState{Status: core.StatusRunning, Labels: foreign}, nil)

	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.False(t, h.Runtime.Exists("c-stray"))
	assert.True(t, h.Runtime.Running("c-old"))
	assert.True(t, h.Runtime.Exists("c-other-app"), "another app's container is not ours to remove")
	assert.True(t, h.Runtime.Running("c-same-name"), "another incarnation's container is not ours to remove")
	assert.Empty(t, h.Events.Find("stop", "c-old"))
}

// TestR55_RemoveRemovesContainersNoRecordOwns: remove ends the incarnation
// only once every container labelled for the app is gone, also one no
// record owns.
func TestR55_RemoveRemovesContainersNoRecordOwns(t *testing.T) {
	h := seedWeb(t, 0)
	lb := workloadLabels("op-gone")
	lb[core.LabelService] = "web"
	lb[core.LabelIncarnation] = incarnationOf(t, h, "blog")
	h.Runtime.AddContainer("c-stray", core.ContainerState{Status: core.StatusCreated, Labels: lb}, nil)

	res, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Empty(t, h.Runtime.Containers())
}

// TestR5_KilledSequentialDeployJournalsBeforeAndIsRolledBack: a real
// sequential deploy "killed" (its goroutine ends) right after the runtime
// created the candidate: the journal on disk already names the replaced
// generation as Before (pinned table, R5.2) but not the candidate; the old
// container is gone. One reconcile pass removes the unjournaled candidate
// and rebuilds the old generation.
func TestR5_KilledSequentialDeployJournalsBeforeAndIsRolledBack(t *testing.T) {
	h := coretest.NewEngine(t)
	spec := core.ServiceSpec{Name: "db", Image: "registry.example/pg:16", TCP: []core.L4Interface{{Port: 5432, Publish: "0.0.0.0:15432"}},
		Volumes:   []core.VolumeMount{{Name: "data", Path: "/var/lib/postgresql/data"}},
		Readiness: core.Readiness{Type: core.ReadinessTCP, Port: 5432, Timeout: core.Duration(time.Second)}}
	h.SeedServing("blog", coretest.BlogApp(spec), map[string]string{"db": "c-old"}, map[string]map[int]int{"db": {5432: 17000}})
	next := spec
	next.Image = "registry.example/pg:17"
	app := coretest.BlogApp(next)
	app.Name = "blog"
	rev, err := h.Engine.SubmitRevision(h.Ctx(), app, "sha-17")
	require.NoError(t, err)
	h.Runtime.NextIDs = []string{"c-new", "c-rebuilt"}
	h.Runtime.NextBinds = []map[int]int{{5432: 18081}, {5432: 18082}}

	var journaled core.Operation
	h.Engine.AfterCreate = func(id string) {
		latest, err := h.Store.LatestOp(h.Ctx(), "blog")
		if err == nil {
			journaled = latest
		}
		runtime.Goexit() // the kill: nothing after the create runs
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	}()
	<-done
	h.Engine.AfterCreate = nil
	h.Engine.ExpForgetLive("blog")

	st := journaled.Step(engine.ServiceStepID("db", "replace"))
	require.NotNil(t, st, "the pinned table is journaled: %+v", journaled)
	assert.Equal(t, "c-old", st.Before, "the replaced generation is journaled before it is touched")
	assert.Empty(t, st.After, "the kill came before the candidate was journaled")
	assert.False(t, h.Runtime.Exists("c-old"), "the sequential flow removed the old generation")
	require.True(t, h.Runtime.Exists("c-new"))

	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.Equal(t, []string{"c-rebuilt"}, h.Runtime.Containers(), "the unjournaled candidate is removed, one generation runs")
	db := lcActive(t, h, "blog").Services["db"]
	assert.Equal(t, "c-rebuilt", db.Container)
	assert.Equal(t, "registry.example/pg:16", db.Spec.Image, "rolled back to the pinned revision")
	assert.Equal(t, []int{18082}, h.LastRoute("blog", "db"))
	assert.Empty(t, h.Store.Markers("blog"))
}

// TestR58_PassHoldsASingleWriterWhileItVerifiesAFreshExecution: the pass
// withdraws a fresh execution before verifying it (R41.4); for a
// single-writer service that withdrawal holds the host (R58) instead of
// dropping its route, and the verified container is then routed with no
// hold left.
func TestR58_PassHoldsASingleWriterWhileItVerifiesAFreshExecution(t *testing.T) {
	h := coretest.NewEngine(t)
	kv := coretest.WebSpec(0)
	kv.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
	h.SeedServing("blog", coretest.BlogApp(kv), map[string]string{"web": "c-1"}, map[string]map[int]int{"web": {8080: 17000}})

	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	held, routed := false, false
	for _, g := range h.Traffic.Graphs() {
		for _, r := range g.HTTP {
			if r.App != "blog" {
				continue
			}
			if r.Hold != nil && len(r.Backends) == 0 {
				held = true
			}
			if held && r.Hold == nil && len(r.Backends) == 1 {
				routed = true
			}
			assert.False(t, r.Hold == nil && len(r.Backends) == 0, "the host is never left without route or hold")
		}
	}
	assert.True(t, held, "held while verified")
	assert.True(t, routed, "routed once verified")
	assert.Nil(t, lcActive(t, h, "blog").Services["web"].HoldUntil, "no hold left after the pass")
}
