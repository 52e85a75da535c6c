package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// monitoredWeb is depNewWeb watched for window with max rate 10 % over at
// least 20 requests.
func monitoredWeb(window time.Duration) core.ServiceSpec {
	s := depNewWeb(0)
	s.Monitor = &core.Monitor{Window: core.Duration(window), MaxErrorRate: 0.1, MinRequests: 20}
	return s
}

// monitorHarness seeds blog (web → c-old) with a fast monitor tick and
// makes the fake edge count, for c-new, perCall requests and perCallErrs
// errors per status read.
func monitorHarness(t *testing.T, perCall, perCallErrs int64) *coretest.Harness {
	t.Helper()
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Engine.MonitorTick = 5 * time.Millisecond
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18080}}
	h.Traffic.Counts = func(b routetable.Backend, calls int) (int64, int64) {
		if b.Container != "c-new" {
			return 0, 0
		}
		return perCall * int64(calls), perCallErrs * int64(calls)
	}
	return h
}

// TestR76_BreachRollsBackToTheStandby: the new generation answers 50 %
// errors; once 20 requests are seen the deploy starts the stopped old
// generation, probes it, routes it again, retires the new one, journals an
// automatic rollback and fails naming the measured rate.
func TestR76_BreachRollsBackToTheStandby(t *testing.T) {
	h := monitorHarness(t, 10, 5)
	res, err := depDeploy(t, h, engine.DeployRequest{}, monitoredWeb(10*time.Second))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "automatic rollback of service web: error rate 50%")
	assert.Contains(t, err.Error(), "c-old")
	require.NotNil(t, res)
	require.Len(t, res.Services, 1)
	assert.Equal(t, "c-old", res.Services[0].Before)
	assert.Empty(t, res.Services[0].After, "the result names no new generation: it was retired")
	assert.Empty(t, depLastOp(t, h).Step("service.web.replace").After)

	seq := h.Events.Seq("create", "start", "ready", "stop", "remove")
	assert.Equal(t, []string{"create c-new", "start c-new", "ready c-new", "stop c-old", "start c-old", "ready c-old", "stop c-new", "remove c-new"}, seq,
		"the old generation is stopped (not removed), then started and probed before the new one goes")
	a, ok := h.Store.Active("blog")
	require.True(t, ok)
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.True(t, h.Runtime.Running("c-old"))
	assert.False(t, slices.Contains(h.Runtime.Containers(), "c-new"))
	assert.Len(t, h.LastRoute("blog", "web"), 1)
	assert.Empty(t, h.Store.Markers("blog"), "no marker is left to retire anything later")

	op := depLastOp(t, h)
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	st := op.Step(engine.MonitorStepID("web"))
	require.NotNil(t, st)
	assert.Equal(t, engine.MonitorRolledBack, st.Result)
	assert.Contains(t, st.Detail, "automatic rollback: error rate 50%")
	require.NotNil(t, st.Rollback, "the measured rollback is journaled for ops and [notify]")
	assert.Equal(t, "overlap", st.Rollback.Flow)
	assert.True(t, st.Rollback.Succeeded)
	assert.Equal(t, int64(20), st.Rollback.Requests)

	// A later reconcile pass leaves the rolled-back service alone.
	h.Reset()
	require.NoError(t, pass(h))
	assert.Empty(t, h.Events.Seq("create", "stop", "remove"))
	a, _ = h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
}

// TestR76_NoBreachRetiresTheStandby: a clean window ends with the standby
// removed and the deploy succeeded; progress counts the window down.
func TestR76_NoBreachRetiresTheStandby(t *testing.T) {
	h := monitorHarness(t, 10, 0)
	_, err := depDeploy(t, h, engine.DeployRequest{}, monitoredWeb(100*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, []string{"create c-new", "start c-new", "ready c-new", "stop c-old", "stop c-old", "remove c-old"},
		h.Events.Seq("create", "start", "ready", "stop", "remove"))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.False(t, slices.Contains(h.Runtime.Containers(), "c-old"))
	op := depLastOp(t, h)
	assert.Equal(t, core.OutcomeSuccess, op.Outcome)
	st := op.Step(engine.MonitorStepID("web"))
	require.NotNil(t, st)
	assert.Equal(t, core.StepSucceeded, st.State)
	assert.Equal(t, engine.MonitorKept, st.Result)
	var ticks int
	for _, ev := range h.Progress() {
		if ev.Phase == engine.PhaseMonitor {
			ticks++
		}
	}
	assert.Positive(t, ticks, "progress shows the monitor's countdown")
}

// TestR76_TooFewRequestsNeverRollBack: every request fails, but fewer than
// min_requests are seen in the window: the new generation stays.
func TestR76_TooFewRequestsNeverRollBack(t *testing.T) {
	h := monitorHarness(t, 0, 0)
	h.Traffic.Counts = func(b routetable.Backend, _ int) (int64, int64) {
		if b.Container == "c-new" {
			return 19, 19
		}
		return 0, 0
	}
	_, err := depDeploy(t, h, engine.DeployRequest{}, monitoredWeb(100*time.Millisecond))
	require.NoError(t, err)
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.Equal(t, core.OutcomeSuccess, depLastOp(t, h).Outcome)
}

// TestR76_FailedAfterSwitchRollsBack: with a monitor, a failed after_switch
// hook rolls the service back at once.
func TestR76_FailedAfterSwitchRollsBack(t *testing.T) {
	h := monitorHarness(t, 0, 0)
	h.Runtime.SetExec(exitWith)
	s := monitoredWeb(10 * time.Second)
	s.Hooks = &core.Hooks{AfterSwitch: &core.HookCommand{Command: []string{"fail"}}}
	_, err := depDeploy(t, h, engine.DeployRequest{}, s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "automatic rollback of service web: the after_switch hook failed")
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.True(t, h.Runtime.Running("c-old"))
}

// TestR76_CrashDuringWindowConverges: a crash while the window runs leaves
// the op unfinished, the new generation in ACTIVE and the standby stopped
// with its retirement-pending marker; reconciliation keeps what ACTIVE
// names and removes the standby.
func TestR76_CrashDuringWindowConverges(t *testing.T) {
	h := monitorHarness(t, 1, 0)
	var crashed core.Operation
	h.Traffic.Counts = func(routetable.Backend, int) (int64, int64) {
		if crashed.ID == "" {
			op, err := h.Store.LatestOp(context.Background(), "blog")
			if err == nil && op.Step(engine.MonitorStepID("web")) != nil {
				crashed = op
			}
		}
		return 0, 0
	}
	_, err := depDeploy(t, h, engine.DeployRequest{}, monitoredWeb(100*time.Millisecond))
	require.NoError(t, err)
	require.NotEmpty(t, crashed.ID, "the journal was captured inside the window")
	require.False(t, crashed.Terminal())
	mon := crashed.Step(engine.MonitorStepID("web"))
	require.NotNil(t, mon)
	assert.Equal(t, core.StepPending, mon.State)

	// What a kill -9 inside the window leaves: that journal, the standby
	// stopped with its marker.
	require.NoError(t, h.Store.SaveOp(h.Ctx(), crashed))
	h.Runtime.AddContainer("c-old", core.ContainerState{}, map[int]int{8080: 17000})
	require.NoError(t, h.Runtime.StopContainer(h.Ctx(), "c-old", time.Second))
	require.NoError(t, h.Store.SaveMarker(h.Ctx(), core.Marker{App: "blog", Service: "web", Container: "c-old",
		Reason: core.MarkerRetirementPending, Operation: crashed.ID, CreatedAt: time.Now()}))

	h.Reset()
	require.NoError(t, pass(h))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.True(t, h.Runtime.Running("c-new"))
	assert.False(t, slices.Contains(h.Runtime.Containers(), "c-old"), "the standby is removed")
	assert.Empty(t, h.Store.Markers("blog"))
	assert.True(t, depLastOp(t, h).Terminal())
}

// TestR76_BreachWithReplicasRestoresTheWholeOldSet: the rate is summed
// over every new instance; the rollback restarts and routes every old
// instance and retires every new one.
func TestR76_BreachWithReplicasRestoresTheWholeOldSet(t *testing.T) {
	h := repSeedSet(t, "c-o1", "c-o2")
	h.Runtime.AddContainer("c-o1", core.ContainerState{}, map[int]int{8080: 17000})
	h.Engine.MonitorTick = 5 * time.Millisecond
	h.Runtime.NextIDs = []string{"c-a", "c-b"}
	h.Traffic.Counts = func(b routetable.Backend, calls int) (int64, int64) {
		switch b.Container {
		case "c-a":
			return 10 * int64(calls), 0
		case "c-b":
			return 10 * int64(calls), 4 * int64(calls)
		}
		return 0, 0
	}
	s := repWeb(2)
	s.Monitor = &core.Monitor{Window: core.Duration(10 * time.Second), MaxErrorRate: 0.1, MinRequests: 20}
	_, err := depDeploy(t, h, engine.DeployRequest{}, s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "automatic rollback of service web: error rate 20%")
	assert.Equal(t, []string{"c-o1", "c-o2"}, repIDs(repInstances(t, h)))
	assert.Equal(t, []string{"c-o1", "c-o2"}, repRouted(t, h))
	for _, id := range []string{"c-o1", "c-o2"} {
		assert.True(t, h.Runtime.Running(id), id)
	}
	for _, id := range []string{"c-a", "c-b"} {
		assert.False(t, h.Runtime.Exists(id), id)
	}
}

// TestR76_FailedRollbackKeepsTheNewGeneration: when the standby cannot be
// started, the new generation keeps serving, the standby is retired, and
// the error says both.
func TestR76_FailedRollbackKeepsTheNewGeneration(t *testing.T) {
	h := monitorHarness(t, 10, 5)
	h.Runtime.Fail(coretest.MStart, "c-old", errors.New("no space left on device"), 1)
	_, err := depDeploy(t, h, engine.DeployRequest{}, monitoredWeb(10*time.Second))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the automatic rollback failed")
	assert.Contains(t, err.Error(), "the new generation c-new still serves")
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.Equal(t, []int{18080}, h.LastRoute("blog", "web"))
	assert.False(t, slices.Contains(h.Runtime.Containers(), "c-old"))
}
