package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// seedPass is the seed of S43, S45–S48: ACTIVE web → c-new ({8080:18081},
// stateless spec) and one retirement-pending marker per old container
// (no grace), each old container still running.
func seedPass(t *testing.T, olds ...string) *coretest.Harness {
	t.Helper()
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-new"}, map[string]map[int]int{"web": {8080: 18081}})
	for _, old := range olds {
		h.Runtime.AddContainer(old, core.ContainerState{Status: core.StatusRunning, StartedAt: coretest.T0.Add(-time.Hour)}, map[int]int{8080: 17000})
		h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: old, Reason: core.MarkerRetirementPending, Operation: "op-0"})
	}
	return h
}

func markerContainers(t *testing.T, h *coretest.Harness) []string {
	t.Helper()
	ms, err := h.Store.LoadMarkers(context.Background(), "blog")
	require.NoError(t, err)
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Container)
	}
	return out
}

func pass(h *coretest.Harness) error {
	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	return err
}

func TestS43_RetireOnlyAfterVerifiedSuccessor(t *testing.T) {
	h := seedPass(t, "c-old")
	h.Runtime.Fail("inspect", "c-new", errors.New("engine hiccup"), 1)
	require.Error(t, pass(h))
	require.Equal(t, -1, h.Events.Index("stop", "c-old"), "c-old not stopped")
	require.Equal(t, []string{"c-old"}, markerContainers(t, h))

	require.NoError(t, pass(h))
	stops := h.Runtime.Stops()
	require.Len(t, stops, 1)
	require.Equal(t, "c-old", stops[0].ID)
	require.Equal(t, 30*time.Second, stops[0].Grace)
	require.False(t, h.Runtime.Exists("c-old"), "c-old removed")
	require.Empty(t, markerContainers(t, h))
	require.Equal(t, []int{18081}, coretest.HostPorts(h.Traffic.Last(), "blog", "web"))
}

func TestS44_NeverRetireWhatActiveNames(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {8080: 17000}})
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-old", Reason: core.MarkerRetirementPending})
	require.NoError(t, pass(h))
	require.Zero(t, h.Events.Count("stop", ""), "nothing stopped")
	require.Zero(t, h.Events.Count("remove", ""), "nothing removed")
	require.Empty(t, markerContainers(t, h))
	a, err := h.Store.LoadActive(context.Background(), "blog")
	require.NoError(t, err)
	require.Equal(t, "c-old", a.Services["web"].Container)
}

func TestS45_VerifiedByThisPassOnly(t *testing.T) {
	h := seedPass(t, "c-old")
	h.Runtime.Fail("remove", "c-old", errors.New("device busy"), 1)
	require.Error(t, pass(h), "pass 1: removal fails")
	require.Equal(t, 1, h.Events.Count("stop", "c-old"))

	// Pass 2: c-new is first seen restarting (later inspections would show
	// it running with a new start time): not verified this pass.
	h.Runtime.InspectSeq("c-new",
		core.ContainerState{Status: core.StatusRestarting, StartedAt: coretest.T0},
		core.ContainerState{Status: core.StatusRunning, StartedAt: coretest.T0.Add(time.Minute)})
	h.Reset()
	require.NoError(t, pass(h))
	require.Zero(t, h.Events.Count("stop", "c-old"), "c-old not stopped in pass 2")
	require.Equal(t, []string{"c-old"}, markerContainers(t, h))
}

func TestS46_SuccessorRestartedAfterVerification(t *testing.T) {
	h := seedPass(t, "c-old")
	running := func(at time.Time) core.ContainerState {
		return core.ContainerState{Status: core.StatusRunning, StartedAt: at}
	}
	h.Runtime.InspectSeq("c-new", running(coretest.T0), running(coretest.T0), running(coretest.T0.Add(time.Minute)))
	require.NoError(t, pass(h))
	require.Zero(t, h.Events.Count("stop", "c-old"))
	require.Equal(t, []string{"c-old"}, markerContainers(t, h))
}

func TestS47_StackedPredecessors(t *testing.T) {
	h := seedPass(t, "c-old-1", "c-old-2")
	require.NoError(t, pass(h))
	for _, id := range []string{"c-old-1", "c-old-2"} {
		require.Equal(t, 1, h.Events.Count("stop", id), id)
		require.False(t, h.Runtime.Exists(id), id)
	}
	for _, s := range h.Runtime.Stops() {
		require.Equal(t, 30*time.Second, s.Grace)
	}
	for _, e := range h.Events.List() {
		if e.Kind == "remove" {
			require.NotEqual(t, "force", e.Detail, "non-force removal")
		}
	}
	require.Empty(t, markerContainers(t, h))
}

func TestS48_PassKeepsMarkerUntilClaimsReleased(t *testing.T) {
	h := seedPass(t, "c-old")
	h.Store.FailNext("ReleaseClaims", errors.New("claims.json busy"))
	err := pass(h)
	require.Error(t, err)
	require.Contains(t, err.Error(), "release backend claims")
	require.Equal(t, []string{"c-old"}, markerContainers(t, h))
	require.False(t, h.Runtime.Exists("c-old"), "stopped and removed in pass 1")

	require.NoError(t, pass(h), "pass 2: removal not-found counts as gone; release ok")
	require.Empty(t, markerContainers(t, h))
}

func TestR41_GoneContainerWithdrawnAndReported(t *testing.T) {
	h := seedPass(t)
	h.Runtime.Delete("c-new")
	err := pass(h)
	require.ErrorIs(t, err, core.ErrNotFound)
	require.Contains(t, err.Error(), "c-new")
	require.Equal(t, 1, h.Events.Count("withdraw", "blog/web"))
	require.Empty(t, coretest.HostPorts(h.Traffic.Last(), "blog", "web"), "withdrawn from routing")
	// Its host is still known to the edge: 503 with Retry-After, not 404.
	assertUnavailable(t, h.Traffic.Last())
}

func TestR41_ExitedContainerStartedAndRerouted(t *testing.T) {
	h := seedPass(t)
	h.Runtime.SetState("c-new", core.StatusExited, coretest.T0)
	h.Runtime.SetBinds("c-new", map[int]int{8080: 18090})
	require.NoError(t, pass(h))
	require.Equal(t, 1, h.Events.Count("start", "c-new"))
	require.Equal(t, []int{18090}, coretest.HostPorts(h.Traffic.Last(), "blog", "web"))
	a, err := h.Store.LoadActive(context.Background(), "blog")
	require.NoError(t, err)
	require.Equal(t, map[int]int{8080: 18090}, a.Services["web"].BackendBinds)
}

func TestR38_SeenExecutionNotWithdrawnAgain(t *testing.T) {
	h := seedPass(t)
	require.NoError(t, pass(h))
	require.Equal(t, 1, h.Events.Count("withdraw", "blog/web"), "first pass: fresh execution")
	h.Reset()
	applies := h.Traffic.Attempts()
	require.NoError(t, pass(h))
	require.Zero(t, h.Events.Count("withdraw", "blog/web"), "second pass: seen")
	require.Equal(t, applies, h.Traffic.Attempts(), "nothing republished without a change")
}

func TestR1_PassSkipsBusyApp(t *testing.T) {
	h := seedPass(t, "c-old")
	lock, err := h.Store.Lock(context.Background(), "blog", core.LockHolder{PID: 2, Verb: "deploy"})
	require.NoError(t, err)
	reps, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	require.True(t, reps[0].Skipped)
	require.Zero(t, h.Events.Count("stop", ""))
	require.NoError(t, lock.Unlock())
}

func TestR42_StoppedAppRevivedContainerStopped(t *testing.T) {
	h := seedPass(t, "c-old")
	require.NoError(t, h.Store.SaveIntent(context.Background(), "blog", core.Intent{Stopped: true}))
	require.NoError(t, pass(h))
	require.Equal(t, 1, h.Events.Count("stop", "c-new"), "revived container stopped")
	require.True(t, h.Runtime.Exists("c-new"), "never removed")
	require.False(t, h.Runtime.Exists("c-old"), "pending retirement proceeds without a successor")
}

func TestCrashLoopBudget(t *testing.T) {
	h := seedPass(t)
	for i := 0; i < 3; i++ {
		h.Runtime.SetState("c-new", core.StatusExited, coretest.T0)
		require.NoError(t, pass(h), "attempt %d", i+1)
	}
	require.Equal(t, 3, h.Events.Count("start", "c-new"))
	h.Runtime.SetState("c-new", core.StatusExited, coretest.T0)
	err := pass(h)
	require.ErrorIs(t, err, core.ErrConflict)
	require.Contains(t, err.Error(), "crash-looping")
	require.Equal(t, 3, h.Events.Count("start", "c-new"), "fourth start waits for the backoff")
	h.Clock.Advance(61 * time.Second)
	require.NoError(t, pass(h))
	require.Equal(t, 4, h.Events.Count("start", "c-new"))
}

// overlapDeployed runs an overlap deploy from the seeded serving app: c-old
// (17000) is replaced by c-new at T0 with bind 18081.
func overlapDeployed(t *testing.T) *coretest.Harness {
	t.Helper()
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {8080: 17000}})
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18081}}
	next := coretest.WebSpec(0)
	next.Image = "registry.example/blog:1.5"
	res, err := depDeploy(t, h, engine.DeployRequest{}, next)
	require.NoError(t, err)
	require.Equal(t, core.OutcomeSuccess, res.Outcome)
	h.Reset()
	return h
}

func TestS49_FreshlyDeployedGenerationNotWithdrawn(t *testing.T) {
	h := overlapDeployed(t)
	require.NoError(t, pass(h))
	require.Empty(t, h.Withdrawals(), "the deploy recorded the verified execution")
	for _, g := range h.Traffic.Graphs() {
		require.Equal(t, []int{18081}, coretest.HostPorts(g, "blog", "web"))
	}
	a, err := h.Store.LoadActive(context.Background(), "blog")
	require.NoError(t, err)
	require.Equal(t, map[int]int{8080: 18081}, a.Services["web"].BackendBinds)
}

func TestS50_RestartAfterDeployIsFresh(t *testing.T) {
	h := overlapDeployed(t)
	h.Runtime.SetState("c-new", core.StatusRunning, coretest.T0.Add(time.Minute))
	h.Runtime.SetBinds("c-new", map[int]int{8080: 18090})
	require.NoError(t, pass(h))
	require.Equal(t, []string{"blog/web"}, h.Withdrawals())
	require.Equal(t, []int{18090}, h.LastRoute("blog", "web"))
}

func TestS51_RestartedGenerationNotWithdrawn(t *testing.T) {
	h := coretest.NewEngine(t)
	spec := coretest.WebSpec(0)
	spec.Replace = core.ReplaceSequential // restarted in place (R53)
	h.SeedServing("blog", coretest.BlogApp(spec), map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {8080: 17000}})
	h.Runtime.StartTime = coretest.T0.Add(time.Hour)
	h.Runtime.SetBinds("c-old", map[int]int{8080: 17002})
	_, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	h.Reset()
	require.NoError(t, pass(h))
	require.Empty(t, h.Withdrawals(), "the restart recorded the new execution")
	require.Equal(t, []int{17002}, h.LastRoute("blog", "web"))
}

// Found by the crash-at-every-boundary e2e test: an overlap deploy killed
// after ACTIVE named the candidate but before traffic switched. The pass
// verifies the candidate before touching routing, so the host is never left
// without a route (no withdrawal, no empty graph), then switches and
// retires the predecessor.
func TestR41_InterruptedOverlapVerifiedBeforeAnyWithdrawal(t *testing.T) {
	h := seedPass(t, "c-old")
	require.NoError(t, pass(h))
	require.Empty(t, h.Withdrawals(), "no withdrawal while the predecessor may still serve")
	for _, g := range h.Traffic.Graphs() {
		require.NotEmpty(t, coretest.HostPorts(g, "blog", "web"), "never a graph without a route for the host")
	}
	require.Equal(t, []int{18081}, h.LastRoute("blog", "web"))
	require.False(t, h.Runtime.Exists("c-old"), "predecessor retired after the switch")
}

// Without a pending predecessor a fresh execution is still withdrawn first
// (R41.4, S50).
func TestR41_FreshWithoutPredecessorWithdrawnFirst(t *testing.T) {
	h := seedPass(t)
	require.NoError(t, pass(h))
	require.Equal(t, []string{"blog/web"}, h.Withdrawals())
}
