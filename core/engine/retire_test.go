package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// seedWeb seeds SPEC §3's serving app (ACTIVE web → c-old, {8080:17000})
// with the given old grace.
func seedWeb(t *testing.T, grace time.Duration) *coretest.Harness {
	t.Helper()
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(grace)),
		map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {8080: 17000}})
	return h
}

func retirementMarker(container string, grace time.Duration) core.Marker {
	return core.Marker{App: "blog", Service: "web", Container: container, Reason: core.MarkerRetirementPending,
		Operation: "op-1", StopGrace: core.Duration(grace)}
}

// TestR23_RetireStopsRemovesReleasesClearsInOrder: steps 2–7 in order, with
// the given grace, non-force removal; the result is gone and settled.
func TestR23_RetireStopsRemovesReleasesClearsInOrder(t *testing.T) {
	h := seedWeb(t, 0)
	h.SeedMarker(retirementMarker("c-old", 45*time.Second))
	r := h.Engine.ExpRetire(h.Ctx(), "blog", "c-old", engine.RetireOptions{Service: "web", Grace: 45 * time.Second,
		ClearMarker: true, RetryOnLeak: true})
	assert.True(t, r.Gone)
	assert.True(t, r.Released)
	assert.True(t, r.Settled)
	assert.Empty(t, r.Warnings)
	require.NoError(t, r.Err("c-old"))
	// File-secret copies are deleted under the ID and under the container's
	// name (where deploy wrote them), read from its labels before removal.
	assert.Equal(t, []string{"stop c-old", "remove c-old", "claims-release c-old", "secrets-delete c-old", "secrets-delete gordon-blog-web-seed", "marker-clear c-old"},
		h.Events.Seq("stop", "remove", "claims-release", "secrets-delete", "marker-clear"))
	assert.Equal(t, []coretest.StopCall{{ID: "c-old", Grace: 45 * time.Second}}, h.Runtime.Stops())
	assert.Equal(t, "", h.Events.Find("remove", "c-old")[0].Detail, "non-force removal")
	assert.False(t, h.Runtime.Exists("c-old"))
	assert.Empty(t, h.Store.ClaimsOf("c-old"))
	assert.Empty(t, h.Store.Markers("blog"))
}

// TestR25_RetireZeroGraceUsesDefault: zero grace stops with 30 s.
func TestR25_RetireZeroGraceUsesDefault(t *testing.T) {
	h := seedWeb(t, 0)
	r := h.Engine.ExpRetire(h.Ctx(), "blog", "c-old", engine.RetireOptions{Service: "web"})
	require.True(t, r.Settled)
	assert.Equal(t, []coretest.StopCall{{ID: "c-old", Grace: 30 * time.Second}}, h.Runtime.Stops())
}

// TestR23_EmptyIDIsGoneAndSettled: step 1, no runtime or store effect.
func TestR23_EmptyIDIsGoneAndSettled(t *testing.T) {
	h := coretest.NewEngine(t)
	r := h.Engine.ExpRetire(h.Ctx(), "blog", "", engine.RetireOptions{Service: "web", ClearMarker: true})
	assert.True(t, r.Gone && r.Released && r.Settled)
	assert.Empty(t, h.Events.List())
}

// TestR23_StopFailureKeepsEverything: warning "stop: <err>", not gone, no
// removal, claims and marker kept; Err carries the detail and both classes.
func TestR23_StopFailureKeepsEverything(t *testing.T) {
	h := seedWeb(t, 0)
	h.SeedMarker(retirementMarker("c-old", 0))
	boom := fmt.Errorf("daemon busy: %w", core.ErrUnavailable)
	h.Runtime.Fail(coretest.MStop, "c-old", boom, 1)
	r := h.Engine.ExpRetire(h.Ctx(), "blog", "c-old", engine.RetireOptions{Service: "web", ClearMarker: true, RetryOnLeak: true})
	assert.False(t, r.Gone)
	assert.False(t, r.Settled)
	require.Len(t, r.Warnings, 1)
	assert.Equal(t, core.Warning{Service: "web", Leftover: "c-old", Detail: "stop: daemon busy: unavailable"}, r.Warnings[0])
	assert.Equal(t, 0, h.Runtime.Calls(coretest.MRemove))
	assert.True(t, h.Runtime.Running("c-old"))
	assert.NotEmpty(t, h.Store.ClaimsOf("c-old"))
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"))
	err := r.Err("c-old")
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "c-old")
	assert.Contains(t, err.Error(), "stop: daemon busy")
}

// TestS18_RemoveFailureIsWarningClaimsKept: stop ok, removal fails →
// warning {web, c-old, remove: …}; claims not released; marker not cleared.
func TestS18_RemoveFailureIsWarningClaimsKept(t *testing.T) {
	h := seedWeb(t, 0)
	h.SeedMarker(retirementMarker("c-old", 0))
	h.Runtime.Fail(coretest.MRemove, "c-old", errors.New("device busy"), 1)
	r := h.Engine.ExpRetire(h.Ctx(), "blog", "c-old", engine.RetireOptions{Service: "web", ClearMarker: true, RetryOnLeak: true})
	assert.False(t, r.Gone)
	require.Len(t, r.Warnings, 1)
	assert.Equal(t, "c-old", r.Warnings[0].Leftover)
	assert.Equal(t, "web", r.Warnings[0].Service)
	assert.Contains(t, r.Warnings[0].Detail, "remove: device busy")
	assert.Len(t, h.Runtime.Stops(), 1)
	assert.NotEmpty(t, h.Store.ClaimsOf("c-old"))
	assert.Equal(t, 0, h.Store.Calls("ReleaseClaims"))
	assert.Equal(t, 0, h.Store.Calls("ClearMarker"))
	assert.Contains(t, r.Err("c-old").Error(), "remove: device busy")
}

// TestS48_MarkerKeptUntilClaimsReleased: pass 1 release fails → gone but
// not settled, warning `release backend claims`, marker kept (retry-on-leak);
// pass 2 removal not-found (= gone), release ok → settled, marker cleared.
func TestS48_MarkerKeptUntilClaimsReleased(t *testing.T) {
	h := seedWeb(t, 0)
	h.SeedMarker(retirementMarker("c-old", 0))
	h.Store.FailNext("ReleaseClaims", errors.New("claims.json locked"))
	opts := engine.RetireOptions{Service: "web", ClearMarker: true, RetryOnLeak: true}

	r1 := h.Engine.ExpRetire(h.Ctx(), "blog", "c-old", opts)
	assert.True(t, r1.Gone)
	assert.False(t, r1.Released)
	assert.False(t, r1.Settled)
	require.Len(t, r1.Warnings, 1)
	assert.Contains(t, r1.Warnings[0].Detail, "release backend claims")
	assert.Contains(t, r1.Err("c-old").Error(), "release backend claims")
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"))
	assert.NotEmpty(t, h.Store.ClaimsOf("c-old"))

	r2 := h.Engine.ExpRetire(h.Ctx(), "blog", "c-old", opts)
	assert.True(t, r2.Gone && r2.Released && r2.Settled)
	assert.Empty(t, r2.Warnings)
	assert.Empty(t, h.Store.Markers("blog"))
	assert.Empty(t, h.Store.ClaimsOf("c-old"))
}

// TestR23_LeakWithoutRetryOnLeakStillClearsMarker: stop/remove verbs do not
// use retry-on-leak, so a release failure still clears the marker (step 7).
func TestR23_LeakWithoutRetryOnLeakStillClearsMarker(t *testing.T) {
	h := seedWeb(t, 0)
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-old", Reason: core.MarkerRemoved})
	h.Store.FailNext("ReleaseClaims", errors.New("nope"))
	r := h.Engine.ExpRetire(h.Ctx(), "blog", "c-old", engine.RetireOptions{Service: "web", ClearMarker: true})
	assert.True(t, r.Gone)
	assert.False(t, r.Settled)
	assert.Empty(t, h.Store.Markers("blog"))
}

// TestS74_RetireMissingContainerIsIdempotent: not-found stop and removal
// count as done; retiring twice yields the same settled result.
func TestS74_RetireMissingContainerIsIdempotent(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.Delete("c-old")
	for i := 0; i < 2; i++ {
		r := h.Engine.ExpRetire(h.Ctx(), "blog", "c-old", engine.RetireOptions{Service: "web", ClearMarker: true})
		assert.True(t, r.Gone && r.Released && r.Settled, "attempt %d", i+1)
		assert.Empty(t, r.Warnings)
	}
	assert.Empty(t, h.Store.ClaimsOf("c-old"))
}

// TestR23_SecretCleanupFailureDoesNotAffectSettled: step 5's warning only.
func TestR23_SecretCleanupFailureDoesNotAffectSettled(t *testing.T) {
	h := seedWeb(t, 0)
	h.SeedMarker(retirementMarker("c-old", 0))
	h.Store.FailNext("DeleteContainerSecrets", errors.New("permission denied"))
	r := h.Engine.ExpRetire(h.Ctx(), "blog", "c-old", engine.RetireOptions{Service: "web", ClearMarker: true, RetryOnLeak: true})
	assert.True(t, r.Gone && r.Released && r.Settled)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0].Detail, "secret files cleanup failed")
	assert.Empty(t, h.Store.Markers("blog"), "marker still cleared")
	assert.NoError(t, r.Err("c-old"))
}

// TestR23_ClearMarkerFailureWarns: step 7's warning; still settled.
func TestR23_ClearMarkerFailureWarns(t *testing.T) {
	h := seedWeb(t, 0)
	h.SeedMarker(retirementMarker("c-old", 0))
	h.Store.FailNext("ClearMarker", errors.New("markers.json torn"))
	r := h.Engine.ExpRetire(h.Ctx(), "blog", "c-old", engine.RetireOptions{Service: "web", ClearMarker: true, RetryOnLeak: true})
	assert.True(t, r.Settled)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0].Detail, "clear recovery inhibition: markers.json torn")
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"))
}

// TestR24_RemoveCandidateForcesWithoutStop: no stop, force removal, claims
// released, the candidate's markers untouched.
func TestR24_RemoveCandidateForcesWithoutStop(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.AddContainer("c-new", core.ContainerState{}, map[int]int{8080: 18080})
	require.NoError(t, h.Store.RegisterClaims(context.Background(), []core.Claim{{Port: 18080, Protocol: "tcp",
		Owner: core.ClaimOwnerBackend, App: "blog", Container: "c-new"}}))
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-new", Reason: core.MarkerReplacementPending})
	ws := h.Engine.ExpRemoveCandidate(h.Ctx(), "blog", "web", "c-new")
	assert.Empty(t, ws)
	assert.Empty(t, h.Runtime.Stops())
	rm := h.Events.Find("remove", "c-new")
	require.Len(t, rm, 1)
	assert.Equal(t, "force", rm[0].Detail)
	assert.False(t, h.Runtime.Exists("c-new"))
	assert.Empty(t, h.Store.ClaimsOf("c-new"))
	assert.Equal(t, 0, h.Store.Calls("ClearMarker"))
	assert.Equal(t, []string{"c-new"}, h.Store.MarkerContainers("blog"))
	assert.True(t, h.Runtime.Running("c-old"), "the serving generation is not touched")
}

// TestS13_CandidateCleanupFailureStaysVisible: the failed force removal is
// a warning naming the leftover candidate.
func TestS13_CandidateCleanupFailureStaysVisible(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.AddContainer("c-new", core.ContainerState{}, map[int]int{8080: 18080})
	h.Runtime.Fail(coretest.MRemove, "c-new", errors.New("removal refused"), 0)
	ws := h.Engine.ExpRemoveCandidate(h.Ctx(), "blog", "web", "c-new")
	require.Len(t, ws, 1)
	assert.Equal(t, core.Warning{Service: "web", Leftover: "c-new", Detail: "remove: removal refused"}, ws[0])
	assert.True(t, h.Runtime.Exists("c-new"))
}

// TestS14_CancelledRemovalReportsLeftover: a runtime refusing the removal
// with the cancellation error leaves the candidate reported as leftover.
func TestS14_CancelledRemovalReportsLeftover(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.AddContainer("c-new", core.ContainerState{}, nil)
	h.Runtime.Hook = func(ctx context.Context, method, id string) error { return context.Canceled }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ws := h.Engine.ExpRemoveCandidate(ctx, "blog", "web", "c-new")
	require.Len(t, ws, 1)
	assert.Equal(t, "c-new", ws[0].Leftover)
	assert.Contains(t, ws[0].Detail, context.Canceled.Error())
	assert.True(t, h.Runtime.Exists("c-new"))
}

// A Ctrl-C during readiness cancels the caller's context; the candidate is
// still removed, on a detached and bounded context (found by adversarial
// testing: the candidate used to keep running beside the old generation).
func TestR24_CandidateRemovedAfterCallerCancelled(t *testing.T) {
	h := seedWeb(t, 0)
	h.Runtime.AddContainer("c-new", core.ContainerState{Status: core.StatusRunning}, nil)
	h.Runtime.Hook = func(ctx context.Context, method, id string) error { return ctx.Err() }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ws := h.Engine.ExpRemoveCandidate(ctx, "blog", "web", "c-new")
	assert.Empty(t, ws)
	assert.False(t, h.Runtime.Exists("c-new"))
}

// TestR23_ErrWithoutWarningsSaysNotConfirmedGone covers the fallback text.
func TestR23_ErrWithoutWarningsSaysNotConfirmedGone(t *testing.T) {
	err := engine.RetireResult{}.Err("c-x")
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "container not confirmed gone")
	assert.NoError(t, engine.RetireResult{Gone: true, Released: true, Settled: true}.Err("c-x"))
}

// --- routing.go over the fakes (SPEC 1.1 withdraw / rebuild, decision 3, 11) ---

// TestDecision11_WithdrawDropsBindsDurablyThenApplies: binds leave ACTIVE
// before the graph is applied, the graph no longer routes the service, and
// no pending withdrawal remains.
func TestDecision11_WithdrawDropsBindsDurablyThenApplies(t *testing.T) {
	h := seedWeb(t, 0)
	require.NoError(t, h.Engine.ExpWithdraw(h.Ctx(), "blog", "web"))
	assert.Equal(t, []string{"withdraw blog/web", "publish-active blog", "traffic"},
		h.Events.Seq("withdraw", "publish-active", "traffic"))
	a, ok := h.Store.Active("blog")
	require.True(t, ok)
	assert.Empty(t, a.Services["web"].BackendBinds)
	assert.Equal(t, "c-old", a.Services["web"].Container, "withdraw keeps the container")
	assert.Empty(t, coretest.HostPorts(h.Traffic.Last(), "blog", "web"))
	assert.Equal(t, 1, h.Traffic.Applied())
	pending, err := h.Engine.ExpHasPendingWithdrawal(h.Ctx(), "blog", "web")
	require.NoError(t, err)
	assert.False(t, pending)
}

// TestS20_WithdrawFailureRecordsPendingWithdrawal: a rejected apply leaves
// the binds dropped and a durable pending withdrawal; the retry confirms it
// and clears the flag.
func TestS20_WithdrawFailureRecordsPendingWithdrawal(t *testing.T) {
	h := seedWeb(t, 0)
	h.Traffic.FailApplies(1)
	err := h.Engine.ExpWithdraw(h.Ctx(), "blog", "web")
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "blog")
	a, _ := h.Store.Active("blog")
	assert.Empty(t, a.Services["web"].BackendBinds, "binds may already be gone")
	pending, err := h.Engine.ExpHasPendingWithdrawal(h.Ctx(), "blog", "web")
	require.NoError(t, err)
	assert.True(t, pending)
	rec, err := h.Store.LoadRecovery(context.Background(), "blog")
	require.NoError(t, err)
	assert.True(t, rec.PendingWithdrawals["web"], "durable (decision 3)")

	require.NoError(t, h.Engine.ExpRetryPendingWithdrawals(h.Ctx(), "blog"))
	pending, _ = h.Engine.ExpHasPendingWithdrawal(h.Ctx(), "blog", "web")
	assert.False(t, pending)
	assert.Equal(t, 2, h.Events.Count("withdraw", "blog/web"))
	assert.Equal(t, 1, h.Traffic.Applied())
}

// TestS21_WithdrawStateSaveFailureIsNotConfirmed: an ACTIVE save failure
// applies nothing and records a pending withdrawal.
func TestS21_WithdrawStateSaveFailureIsNotConfirmed(t *testing.T) {
	h := seedWeb(t, 0)
	h.Store.FailNext("SaveActive", errors.New("disk full"))
	err := h.Engine.ExpWithdraw(h.Ctx(), "blog", "web")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk full")
	assert.Equal(t, 0, h.Traffic.Attempts())
	a, _ := h.Store.Active("blog")
	assert.Equal(t, map[int]int{8080: 17000}, a.Services["web"].BackendBinds)
	pending, _ := h.Engine.ExpHasPendingWithdrawal(h.Ctx(), "blog", "web")
	assert.True(t, pending)
}

// TestR52_WithdrawStateDropsTCPAndUDPWithoutApplying.
func TestR52_WithdrawStateDropsTCPAndUDPWithoutApplying(t *testing.T) {
	h := coretest.NewEngine(t)
	svc := core.ServiceSpec{Name: "game", Image: "game:1",
		TCP: []core.L4Interface{{Port: 9000, Publish: "0.0.0.0:9000"}},
		UDP: []core.L4Interface{{Port: 28015, Publish: "0.0.0.0:28015"}}}
	h.SeedServing("arena", core.AppSpec{Services: []core.ServiceSpec{svc}}, map[string]string{"game": "c-1"},
		map[string]map[int]int{"game": {9000: 32771, 28015: 32781}})
	a, _ := h.Store.Active("arena")
	require.Equal(t, map[int]int{28015: 32781}, a.Services["game"].UDPBackendBinds)
	require.NoError(t, h.Engine.ExpWithdrawState(h.Ctx(), "arena", "game"))
	a, _ = h.Store.Active("arena")
	assert.Empty(t, a.Services["game"].BackendBinds)
	assert.Empty(t, a.Services["game"].UDPBackendBinds)
	assert.Equal(t, 0, h.Traffic.Attempts())
	// Nothing left to drop: no second save.
	require.NoError(t, h.Engine.ExpWithdrawState(h.Ctx(), "arena", "game"))
	assert.Equal(t, 1, h.Store.Saves("SaveActive"))
	// Unknown app or service: nothing to do.
	require.NoError(t, h.Engine.ExpWithdrawState(h.Ctx(), "nope", "game"))
	require.NoError(t, h.Engine.ExpWithdrawState(h.Ctx(), "arena", "nope"))
}

// TestDecision11_RebuildRoutesEveryAppsActive: one graph from all apps;
// a rejection is an error wrapping ErrUnavailable.
func TestDecision11_RebuildRoutesEveryAppsActive(t *testing.T) {
	h := seedWeb(t, 0)
	shop := coretest.WebSpec(0)
	shop.HTTP[0].Host = "shop.example.com"
	h.SeedServing("shop", core.AppSpec{Services: []core.ServiceSpec{shop}}, map[string]string{"web": "c-shop"},
		map[string]map[int]int{"web": {8080: 17100}})
	require.NoError(t, h.Engine.ExpRebuild(h.Ctx()))
	g := h.Traffic.Last()
	assert.Equal(t, []int{17000}, coretest.HostPorts(g, "blog", "web"))
	assert.Equal(t, []int{17100}, coretest.HostPorts(g, "shop", "web"))
	assert.Equal(t, []string{"127.0.0.1:17000", "127.0.0.1:17100"}, coretest.BackendAddrs(g))

	h.Traffic.FailAppliesWith(1, errors.New("edge did not confirm generation 2"))
	err := h.Engine.ExpRebuild(h.Ctx())
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "generation 2")
	assert.Equal(t, 1, h.Traffic.Applied())

	// One app's unreadable record: the others are routed, its last good
	// routes are kept, and it is reported.
	h.Store.FailNext("LoadActive", errors.New("active.json torn"))
	require.NoError(t, h.Engine.ExpRebuild(h.Ctx()))
	g = h.Traffic.Last()
	assert.Equal(t, []string{"127.0.0.1:17000", "127.0.0.1:17100"}, coretest.BackendAddrs(g))
	assert.Contains(t, h.Engine.UnreadableApps()["blog"], "active.json torn")
}

// TestR21_RetryPendingWithdrawalsSelectedServicesAndAbort: only the given
// services are retried; a failure aborts and keeps the flag.
func TestR21_RetryPendingWithdrawalsSelectedServicesAndAbort(t *testing.T) {
	h := coretest.NewEngine(t)
	api := coretest.WebSpec(0)
	api.Name = "api"
	api.HTTP[0].Host = "api.blog.example.com"
	h.SeedServing("blog", coretest.BlogApp(api, coretest.WebSpec(0)), map[string]string{"api": "c-api", "web": "c-old"},
		map[string]map[int]int{"api": {8080: 17001}, "web": {8080: 17000}})
	require.NoError(t, h.Store.SaveRecovery(context.Background(), "blog",
		core.Recovery{PendingWithdrawals: map[string]bool{"api": true, "web": true}}))
	h.Reset()

	require.NoError(t, h.Engine.ExpRetryPendingWithdrawals(h.Ctx(), "blog", "web"))
	assert.Equal(t, []string{"withdraw blog/web"}, h.Events.Seq("withdraw"))
	rec, _ := h.Store.LoadRecovery(context.Background(), "blog")
	assert.Equal(t, map[string]bool{"api": true}, rec.PendingWithdrawals)

	h.Traffic.FailApplies(1)
	err := h.Engine.ExpRetryPendingWithdrawals(h.Ctx(), "blog")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "retry pending withdrawal")
	pending, _ := h.Engine.ExpHasPendingWithdrawal(h.Ctx(), "blog", "api")
	assert.True(t, pending)
}

// TestDecision16_WaitDrainedOverFakeTraffic: the recording traffic's
// in-flight script drains to zero.
func TestDecision16_WaitDrainedOverFakeTraffic(t *testing.T) {
	h := seedWeb(t, 0)
	h.Traffic.InFlightSeq("127.0.0.1:17000", 2, 1, 0)
	_, err := h.Engine.ExpWaitDrained(h.Ctx(), "127.0.0.1:17000", time.Second)
	require.NoError(t, err)
	st, err := h.Traffic.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(0), st.InFlight("127.0.0.1:17000"))
}
