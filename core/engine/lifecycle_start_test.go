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

func lcActive(t *testing.T, h *coretest.Harness, app string) core.Active {
	t.Helper()
	a, ok := h.Store.Active(app)
	require.True(t, ok, "ACTIVE of %s", app)
	return a
}

func lcClaimPorts(h *coretest.Harness, container string) []int {
	out := []int{}
	for _, c := range h.Store.ClaimsOf(container) {
		out = append(out, c.Port)
	}
	return out
}

// TestS65_StartRefreshesShiftedBinds: a running container whose bind moved
// is re-read, claimed, persisted and routed.
func TestS65_StartRefreshesShiftedBinds(t *testing.T) {
	h := lcSeed(t, "c-old", 32770, 0)
	h.Runtime.SetBinds("c-old", map[int]int{8080: 32771})
	res, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Contains(t, lcClaimPorts(h, "c-old"), 32771)
	assert.Equal(t, map[int]int{8080: 32771}, lcActive(t, h, "blog").Services["web"].BackendBinds)
	assert.Equal(t, []int{32771}, h.LastRoute("blog", "web"))
	web := lcResult(t, res, "web")
	assert.Equal(t, engine.ResultDeployed, web.Result)
	assert.Equal(t, "c-old", web.After)
	assert.Zero(t, h.Runtime.Calls(coretest.MCreate), "never duplicates a running container")
	in, err := h.Store.LoadIntent(context.Background(), "blog")
	require.NoError(t, err)
	assert.False(t, in.Stopped)
	rec, err := h.Store.LoadRecovery(context.Background(), "blog")
	require.NoError(t, err)
	assert.Equal(t, core.VerifiedExecution{Container: "c-old", StartedAt: coretest.T0}, rec.Verified["web"], "R37: recorded after the rebuild")
}

// TestS66_StartBindVerificationFailsClosed: a bind read failure fails the
// step, drops the binds and never routes the service.
func TestS66_StartBindVerificationFailsClosed(t *testing.T) {
	h := lcSeed(t, "c-old", 32770, 0)
	h.Runtime.Fail(coretest.MBinds, "c-old", errors.New("inspect ports: boom"), 1)
	res, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err, "start returns no error for failed services")
	assert.Equal(t, core.OutcomeFailed, res.Outcome)
	assert.Equal(t, engine.ResultFailed, lcResult(t, res, "web").Result)
	assert.Empty(t, lcActive(t, h, "blog").Services["web"].BackendBinds)
	assert.Empty(t, h.LastRoute("blog", "web"))
	assert.Equal(t, core.StepFailed, lcStep(t, lcLatest(t, h), engine.ServiceStepID("web", "start")).State)
}

// TestS53_VerifyRunningNotReady: binds re-read and claimed, readiness fails
// → step failed, binds dropped.
func TestS53_VerifyRunningNotReady(t *testing.T) {
	h := lcSeed(t, "c-1", 32771, 0)
	h.Prober.Script("c-1", core.ProbeResult{}, errors.New("connection refused"))
	res, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, engine.ResultFailed, lcResult(t, res, "web").Result)
	assert.Equal(t, 1, h.Events.Count("binds", "c-1"))
	assert.Equal(t, []int{32771}, lcClaimPorts(h, "c-1"))
	assert.Empty(t, lcActive(t, h, "blog").Services["web"].BackendBinds, "withdraw-state")
	assert.Empty(t, h.LastRoute("blog", "web"))
	assert.Equal(t, core.StepFailed, lcStep(t, lcLatest(t, h), engine.ServiceStepID("web", "start")).State)
}

// TestS54_VerifyRunningReady: binds persisted; deployed with binds and
// start time.
func TestS54_VerifyRunningReady(t *testing.T) {
	h := lcSeed(t, "c-1", 32771, 0)
	res, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	web := lcResult(t, res, "web")
	assert.Equal(t, engine.ResultDeployed, web.Result)
	assert.Equal(t, map[int]int{8080: 32771}, web.BackendBinds)
	assert.Equal(t, coretest.T0, web.StartedAt)
	assert.Equal(t, map[int]int{8080: 32771}, lcActive(t, h, "blog").Services["web"].BackendBinds)
	// R52: withdraw before binds, binds before readiness, routing once after.
	assert.Less(t, h.Events.Index("withdraw", "blog/web"), h.Events.Index("binds", "c-1"))
	assert.Less(t, h.Events.Index("binds", "c-1"), h.Events.Index("ready", "c-1"))
	assert.Less(t, h.Events.Index("ready", "c-1"), h.Events.LastIndex("traffic", ""))
}

// TestR51_StartStartsStoppedContainerByExactID: after a stop that left the
// container (exited, e.g. a revived-then-stopped one), start starts that
// exact ID instead of creating a new one.
func TestR51_StartStartsStoppedContainerByExactID(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	h.Runtime.SetState("c-1", core.StatusExited, coretest.T0)
	res, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, 1, h.Events.Count("start", "c-1"))
	assert.Zero(t, h.Runtime.Calls(coretest.MCreate))
	assert.Less(t, h.Events.Index("start", "c-1"), h.Events.Index("withdraw", "blog/web"))
}

// TestR54_StartAfterStopRebuildsFromPinnedRevision: stop removed c-1; start
// rebuilds it sequentially from the digest ACTIVE pins (not DESIRED).
func TestR54_StartAfterStopRebuildsFromPinnedRevision(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	pinned := lcActive(t, h, "blog").Services["web"]
	_, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	// A newer DESIRED revision must not be activated by start.
	spec := coretest.WebSpec(0)
	spec.Image = "registry.example/blog:2.0"
	_, err = h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(spec), "other")
	require.NoError(t, err)
	h.Reset()
	h.Runtime.NextIDs = []string{"c-rebuilt"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18082}}

	res, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	web := lcActive(t, h, "blog").Services["web"]
	assert.Equal(t, "c-rebuilt", web.Container)
	assert.Equal(t, "rev-0", web.EffectiveRevision)
	assert.Equal(t, pinned.Digest, web.Digest)
	assert.Equal(t, pinned.Image, h.Runtime.Created()[0].Image)
	assert.Equal(t, map[int]int{8080: 18082}, web.BackendBinds)
	assert.Equal(t, []int{18082}, h.LastRoute("blog", "web"))
	st := lcStep(t, lcLatest(t, h), engine.ServiceStepID("web", "start"))
	assert.Equal(t, core.StepSucceeded, st.State)
	assert.Equal(t, "c-rebuilt", st.After)
	// The candidate was journaled on the start step before it was started (R5.3).
	saves := h.Events.Find("journal-save", "")
	journaled := -1
	for i, e := range h.Events.List() {
		if e.Kind == "journal-save" && contains(e.Detail, `"after":"c-rebuilt"`) {
			journaled = i
			break
		}
	}
	require.NotEmpty(t, saves)
	require.GreaterOrEqual(t, journaled, 0, h.Events.String())
	assert.Less(t, journaled, h.Events.Index("start", "c-rebuilt"))
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (func() bool {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
		return false
	})())
}

// TestR51_StartRefusesBlockingMarker: a replacement-pending marker on the
// ACTIVE container refuses it; nothing started or created.
func TestR51_StartRefusesBlockingMarker(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-1", Reason: core.MarkerReplacementPending, Operation: "op-x"})
	res, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeFailed, res.Outcome)
	assert.Contains(t, lcResult(t, res, "web").Error, "recovery inhibited for container c-1")
	assert.Zero(t, h.Runtime.Calls(coretest.MCreate))
	assert.Zero(t, h.Runtime.Calls(coretest.MStart))
	assert.Empty(t, h.LastRoute("blog", "web"))
}

// TestS67_InPlaceRestart: withdraw, restart, re-read binds + claims, ready,
// publish, route.
func TestS67_InPlaceRestart(t *testing.T) {
	h := lcSeedInPlace(t, "c-1", 32770, 0)
	h.Runtime.SetBinds("c-1", map[int]int{8080: 32771})
	h.Runtime.StartTime = coretest.T0.Add(time.Hour)
	res, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	order := []int{
		h.Events.Index("withdraw", "blog/web"),
		h.Events.Index("restart", "c-1"),
		h.Events.Index("binds", "c-1"),
		h.Events.Index("claims-register", "c-1"),
		h.Events.Index("ready", "c-1"),
		h.Events.LastIndex("publish-active", "blog"),
		h.Events.LastIndex("traffic", ""),
	}
	for i := 1; i < len(order); i++ {
		require.Less(t, order[i-1], order[i], "step %d out of order:\n%s", i, h.Events.String())
	}
	assert.Equal(t, map[int]int{8080: 32771}, lcActive(t, h, "blog").Services["web"].BackendBinds)
	assert.Equal(t, []int{32771}, h.LastRoute("blog", "web"))
	web := lcResult(t, res, "web")
	assert.Equal(t, coretest.T0.Add(time.Hour), web.StartedAt)
	rec, err := h.Store.LoadRecovery(context.Background(), "blog")
	require.NoError(t, err)
	assert.Equal(t, coretest.T0.Add(time.Hour), rec.Verified["web"].StartedAt)
	assert.Zero(t, h.Runtime.Calls(coretest.MCreate))
}

// TestS68_RestartReadinessFailure: withdrawn, binds cleared, error.
func TestS68_RestartReadinessFailure(t *testing.T) {
	h := lcSeedInPlace(t, "c-1", 32770, 0)
	h.Prober.Script("c-1", core.ProbeResult{}, errors.New("connection refused"))
	h.Runtime.LogsFor("c-1", "panic: boom")
	res, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "web")
	web := lcResult(t, res, "web")
	assert.Equal(t, engine.ResultFailed, web.Result)
	assert.Equal(t, []string{"panic: boom"}, web.Diagnostics)
	assert.NotContains(t, web.Error, "panic: boom")
	assert.Empty(t, lcActive(t, h, "blog").Services["web"].BackendBinds)
	assert.Empty(t, h.LastRoute("blog", "web"))
	assert.Equal(t, []string{"blog/web"}, h.Withdrawals())
}

// TestS69_RestartRefreshesTCPAndUDPBinds: 9000/tcp → 32771, 9000/udp → 32781.
func TestS69_RestartRefreshesTCPAndUDPBinds(t *testing.T) {
	h := coretest.NewEngine(t)
	spec := core.ServiceSpec{Name: "game", Image: "registry.example/game:1",
		TCP: []core.L4Interface{{Port: 9000, Publish: "0.0.0.0:9000"}},
		UDP: []core.L4Interface{{Port: 9000, Publish: "0.0.0.0:9000"}}}
	h.SeedServing("blog", coretest.BlogApp(spec), map[string]string{"game": "c-1"}, map[string]map[int]int{"game": {9000: 32770}})
	h.Runtime.SetBinds("c-1", map[int]int{9000: 32771})
	h.Runtime.SetUDPBinds("c-1", map[int]int{9000: 32781})
	res, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog", Services: []string{"game"}})
	require.NoError(t, err)
	g := lcActive(t, h, "blog").Services["game"]
	assert.Equal(t, map[int]int{9000: 32771}, g.BackendBinds)
	assert.Equal(t, map[int]int{9000: 32781}, g.UDPBackendBinds)
	assert.Equal(t, map[int]int{9000: 32781}, lcResult(t, res, "game").UDPBackendBinds)
	assert.Subset(t, lcClaimPorts(h, "c-1"), []int{32771, 32781})
}

// TestS70_RestartRebuildsMissingContainer: not found → sequential rebuild.
func TestS70_RestartRebuildsMissingContainer(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	h.Runtime.Delete("c-old")
	h.Runtime.NextIDs = []string{"c-rebuilt"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18082}}
	res, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	web := lcActive(t, h, "blog").Services["web"]
	assert.Equal(t, "c-rebuilt", web.Container)
	assert.Equal(t, map[int]int{8080: 18082}, web.BackendBinds)
	assert.Equal(t, []int{18082}, h.LastRoute("blog", "web"))
	assert.Equal(t, []string{"create c-rebuilt", "start c-rebuilt"}, h.Events.Seq("create", "start"))
	assert.Empty(t, h.Store.ClaimsOf("c-old"), "the missing container's claims are released")
	assert.Equal(t, "c-rebuilt", lcResult(t, res, "web").After)
}

// TestS71_FailedRebuildClearsMissingContainersMarker: a volume service's
// rebuild writes replacement-pending for c-old, the candidate fails
// readiness and is removed, the step fails and c-old's marker is cleared.
func TestS71_FailedRebuildClearsMissingContainersMarker(t *testing.T) {
	h := coretest.NewEngine(t)
	spec := core.ServiceSpec{Name: "db", Image: "registry.example/pg:16",
		TCP:       []core.L4Interface{{Port: 5432}},
		Volumes:   []core.VolumeMount{{Name: "data", Path: "/var/lib/postgresql/data"}},
		Readiness: core.Readiness{Type: core.ReadinessTCP, Port: 5432, Timeout: core.Duration(time.Second)}}
	h.SeedServing("blog", coretest.BlogApp(spec), map[string]string{"db": "c-old"}, map[string]map[int]int{"db": {5432: 17000}})
	h.Runtime.Delete("c-old")
	h.Runtime.NextIDs = []string{"c-rebuild"}
	h.Runtime.NextBinds = []map[int]int{{5432: 18081}}
	h.Prober.Script("c-rebuild", core.ProbeResult{}, errors.New("connection refused"))

	res, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	assert.Equal(t, engine.ResultFailed, lcResult(t, res, "db").Result)
	saves := h.Events.Find("marker-save", "c-old")
	require.Len(t, saves, 1)
	assert.Equal(t, core.MarkerReplacementPending, saves[0].Detail)
	assert.Less(t, h.Events.Index("marker-save", "c-old"), h.Events.Index("create", "c-rebuild"))
	rm := h.Events.Find("remove", "c-rebuild")
	require.Len(t, rm, 1)
	assert.Equal(t, "force", rm[0].Detail)
	assert.Empty(t, h.Store.Markers("blog"), "c-old's marker cleared")
	st := lcStep(t, lcLatest(t, h), engine.ServiceStepID("db", "restart"))
	assert.Equal(t, core.StepFailed, st.State)
	assert.Equal(t, "c-rebuild", st.After)
	assert.Contains(t, h.Runtime.Volumes(), engine.VolumeName("blog", "data"))
}

// TestS52_RebuiltGenerationWithRejectedTrafficIsRestored: the rebuilt
// generation is published but its route rejected; the next pass routes it.
func TestS52_RebuiltGenerationWithRejectedTrafficIsRestored(t *testing.T) {
	h := lcSeedInPlace(t, "c-old", 17000, 0)
	h.Runtime.Delete("c-old")
	h.Runtime.NextIDs = []string{"c-rebuilt"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18082}}
	rejected := 0
	h.Traffic.ApplyFn = func(ctx context.Context, g routetable.Graph) error {
		if len(coretest.HostPorts(g, "blog", "web")) > 0 && rejected == 0 {
			rejected++
			return errors.New("edge timeout")
		}
		return nil
	}
	_, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	for _, g := range h.Traffic.Graphs() {
		assert.Empty(t, coretest.HostPorts(g, "blog", "web"), "zero accepted graphs route the rebuilt generation")
	}
	assert.Equal(t, "c-rebuilt", lcActive(t, h, "blog").Services["web"].Container)
	assert.Equal(t, engine.StepTrafficPublish, lcLatest(t, h).Steps[len(lcLatest(t, h).Steps)-1].ID)

	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.Equal(t, []int{18082}, h.LastRoute("blog", "web"))
}

// TestR53_RestartRefusals: never deployed is a conflict, a service not in
// ACTIVE is not found and names the app's services; nothing is claimed.
func TestR53_RestartRefusals(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	_, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog", Services: []string{"api"}})
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), `no service "api" (its services: web)`)
	_, err = h.Store.EnsureApp(context.Background(), "fresh")
	require.NoError(t, err)
	_, err = h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "fresh"})
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "never deployed")
	_, err = h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "fresh"})
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Zero(t, h.Store.Saves("ClaimOp"))
}
