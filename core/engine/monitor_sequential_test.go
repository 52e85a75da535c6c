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

// withVolume makes s a single-writer service (volume data): replaced
// sequentially (R16, R19).
func withVolume(s core.ServiceSpec) core.ServiceSpec {
	s.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
	return s
}

// seqMonitorHarness is monitorHarness with web a single-writer service.
func seqMonitorHarness(t *testing.T, perCall, perCallErrs int64) *coretest.Harness {
	t.Helper()
	h := depSeedWeb(t, withVolume(coretest.WebSpec(0)))
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

// maxRunning replays the journaled start/stop/remove events from the seed
// (initially running) and returns the most containers running at once.
func maxRunning(h *coretest.Harness, initially ...string) int {
	running := map[string]bool{}
	for _, id := range initially {
		running[id] = true
	}
	most := len(running)
	for _, ev := range h.Events.List() {
		switch ev.Kind {
		case "start":
			running[ev.ID] = true
		case "stop", "remove":
			delete(running, ev.ID)
		}
		most = max(most, len(running))
	}
	return most
}

// TestR76_SequentialBreachRestoresTheOldGenerationNeverTwoRunning: a
// single-writer service's old generation is stopped (not removed) before
// the new one starts; on a breach the new one is stopped and removed
// before the old one starts again, is probed and routed. At no moment do
// two generations run, and the error says the data is not rolled back.
func TestR76_SequentialBreachRestoresTheOldGenerationNeverTwoRunning(t *testing.T) {
	h := seqMonitorHarness(t, 10, 5)
	res, err := depDeploy(t, h, engine.DeployRequest{}, withVolume(monitoredWeb(10*time.Second)))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "automatic rollback of service web: error rate 50%")
	assert.Contains(t, err.Error(), "restored the code, not the data")
	require.NotNil(t, res)
	require.Equal(t, engine.FlowSequential, res.Services[0].Flow)
	assert.Empty(t, res.Services[0].After, "the result names no new generation: it was retired")

	// (retire stops before it removes: the second stop of a stopped
	// container is a no-op.)
	assert.Equal(t, []string{"stop c-old", "create c-new", "start c-new", "ready c-new",
		"stop c-new", "stop c-new", "remove c-new", "start c-old", "ready c-old"},
		h.Events.Seq("create", "start", "ready", "stop", "remove"))
	assert.Equal(t, 1, maxRunning(h, "c-old"), "never two generations running")
	// The rollback holds the service (R58) before the new one stops.
	assert.Less(t, h.Events.LastIndex("withdraw", "blog/web"), h.Events.Index("stop", "c-new"))

	a, ok := h.Store.Active("blog")
	require.True(t, ok)
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.Nil(t, a.Services["web"].HoldUntil, "the hold ended with the routing")
	assert.True(t, h.Runtime.Running("c-old"))
	assert.False(t, h.Runtime.Exists("c-new"))
	assert.Equal(t, []int{17000}, h.LastRoute("blog", "web"))
	assert.Empty(t, h.Store.Markers("blog"))

	op := depLastOp(t, h)
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	st := op.Step(engine.MonitorStepID("web"))
	require.NotNil(t, st)
	assert.Equal(t, engine.MonitorRolledBack, st.Result)
	require.NotNil(t, st.Rollback)
	assert.Equal(t, "sequential", st.Rollback.Flow)
	assert.True(t, st.Rollback.Succeeded)
	assert.True(t, st.Rollback.SingleWriter)
	assert.InDelta(t, 0.5, st.Rollback.ErrorRate, 1e-9)
	assert.Equal(t, "c-old", st.Rollback.Restored)

	// A later reconcile pass leaves the rolled-back service alone.
	h.Reset()
	require.NoError(t, pass(h))
	assert.Empty(t, h.Events.Seq("create", "stop", "remove"))
}

// TestR76_SequentialNoBreachRemovesTheStandby: a clean window keeps the
// new generation and removes the stopped old one; no "not watched"
// warning any more.
func TestR76_SequentialNoBreachRemovesTheStandby(t *testing.T) {
	h := seqMonitorHarness(t, 10, 0)
	res, err := depDeploy(t, h, engine.DeployRequest{}, withVolume(monitoredWeb(100*time.Millisecond)))
	require.NoError(t, err)
	// (retire stops before it removes: the second stop of a stopped
	// container is a no-op.)
	assert.Equal(t, []string{"stop c-old", "create c-new", "start c-new", "ready c-new", "stop c-old", "remove c-old"},
		h.Events.Seq("create", "start", "ready", "stop", "remove"))
	assert.Equal(t, 1, maxRunning(h, "c-old"))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.False(t, h.Runtime.Exists("c-old"))
	assert.Empty(t, h.Store.Markers("blog"))
	op := depLastOp(t, h)
	assert.Equal(t, core.OutcomeSuccess, op.Outcome)
	st := op.Step(engine.MonitorStepID("web"))
	require.NotNil(t, st)
	assert.Equal(t, engine.MonitorKept, st.Result)
	for _, w := range res.Services[0].Warnings {
		assert.NotContains(t, w.Detail, "not watched")
	}
}

// TestR76_SequentialCrashDuringWindowConverges: a crash in the window
// leaves the new generation in ACTIVE and the standby stopped with a
// retirement-pending marker; reconcile keeps what ACTIVE names and removes
// the standby, never starting it.
func TestR76_SequentialCrashDuringWindowConverges(t *testing.T) {
	h := seqMonitorHarness(t, 1, 0)
	var crashed core.Operation
	var markers []core.Marker
	h.Traffic.Counts = func(routetable.Backend, int) (int64, int64) {
		if crashed.ID == "" {
			op, err := h.Store.LatestOp(context.Background(), "blog")
			if err == nil && op.Step(engine.MonitorStepID("web")) != nil {
				crashed, markers = op, h.Store.Markers("blog")
			}
		}
		return 0, 0
	}
	_, err := depDeploy(t, h, engine.DeployRequest{}, withVolume(monitoredWeb(100*time.Millisecond)))
	require.NoError(t, err)
	require.NotEmpty(t, crashed.ID, "the journal was captured inside the window")
	require.False(t, crashed.Terminal())
	require.Len(t, markers, 1)
	assert.Equal(t, "c-old", markers[0].Container)
	assert.Equal(t, core.MarkerRetirementPending, markers[0].Reason, "the standby's marker after publication")

	// What a kill -9 inside the window leaves: that journal and markers,
	// the standby stopped.
	require.NoError(t, h.Store.SaveOp(h.Ctx(), crashed))
	h.Runtime.AddContainer("c-old", core.ContainerState{}, map[int]int{8080: 17000})
	require.NoError(t, h.Runtime.StopContainer(h.Ctx(), "c-old", time.Second))
	require.NoError(t, h.Store.SaveMarker(h.Ctx(), markers[0]))

	h.Reset()
	require.NoError(t, pass(h))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.True(t, h.Runtime.Running("c-new"))
	assert.False(t, h.Runtime.Exists("c-old"), "the standby is removed")
	assert.Equal(t, -1, h.Events.Index("start", "c-old"), "the standby is never started beside the new one")
	assert.Empty(t, h.Store.Markers("blog"))
	assert.True(t, depLastOp(t, h).Terminal())
}

// TestR76_SequentialStandbyThatCannotStart: the new generation is already
// gone when the standby fails to start; the deploy says so, ACTIVE names
// the standby, and reconcile starts it.
func TestR76_SequentialStandbyThatCannotStart(t *testing.T) {
	h := seqMonitorHarness(t, 10, 5)
	h.Runtime.Fail(coretest.MStart, "c-old", errors.New("no space left on device"), 1)
	_, err := depDeploy(t, h, engine.DeployRequest{}, withVolume(monitoredWeb(10*time.Second)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the automatic rollback failed")
	assert.Contains(t, err.Error(), "was already removed")
	assert.Contains(t, err.Error(), "docker gordon reconcile blog")
	assert.False(t, h.Runtime.Exists("c-new"))
	assert.Equal(t, 1, maxRunning(h, "c-old"))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.Nil(t, a.Services["web"].HoldUntil, "the hold ended: held requests get 503 at once")
	st := depLastOp(t, h).Step(engine.MonitorStepID("web"))
	require.NotNil(t, st)
	assert.Equal(t, core.StepFailed, st.State)
	require.NotNil(t, st.Rollback)
	assert.False(t, st.Rollback.Succeeded)

	h.Reset()
	require.NoError(t, pass(h))
	assert.True(t, h.Runtime.Running("c-old"), "reconcile converges on what ACTIVE names")
	assert.False(t, slices.Contains(h.Runtime.Containers(), "c-new"))
}

// TestR76_SequentialWithoutDataHasNoDataNotice: a service replaced
// sequentially by choice (no volume) rolls back without the data notice.
func TestR76_SequentialWithoutDataHasNoDataNotice(t *testing.T) {
	h := monitorHarness(t, 10, 5)
	s := monitoredWeb(10 * time.Second)
	s.Replace = core.ReplaceSequential
	_, err := depDeploy(t, h, engine.DeployRequest{}, s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "automatic rollback of service web")
	assert.NotContains(t, err.Error(), "not the data")
	assert.Equal(t, 1, maxRunning(h, "c-old"))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.True(t, h.Runtime.Running("c-old"))
}

// TestR76_SequentialCrashDuringRollbackConverges: a crash in the rollback
// just before the new generation is removed leaves ACTIVE naming the
// stopped standby (held) and the new generation stopped with a
// retirement-pending marker; reconcile starts and routes the standby,
// removes the new generation and never runs both.
func TestR76_SequentialCrashDuringRollbackConverges(t *testing.T) {
	h := seqMonitorHarness(t, 10, 5)
	var (
		crashed core.Operation
		active  core.Active
		markers []core.Marker
	)
	h.Runtime.Hook = func(_ context.Context, method, id string) error {
		if method == coretest.MRemove && id == "c-new" && crashed.ID == "" {
			op, err := h.Store.LatestOp(context.Background(), "blog")
			require.NoError(t, err)
			crashed, markers = op, h.Store.Markers("blog")
			active, _ = h.Store.Active("blog")
		}
		return nil
	}
	_, err := depDeploy(t, h, engine.DeployRequest{}, withVolume(monitoredWeb(10*time.Second)))
	require.Error(t, err)
	require.NotEmpty(t, crashed.ID)
	h.Runtime.Hook = nil
	require.False(t, crashed.Terminal())
	assert.Equal(t, "c-old", active.Services["web"].Container, "ACTIVE names the standby before the new one goes")
	assert.NotNil(t, active.Services["web"].HoldUntil, "still held")
	require.Len(t, markers, 1)
	assert.Equal(t, "c-new", markers[0].Container)
	assert.Equal(t, core.MarkerRetirementPending, markers[0].Reason)

	// What a kill -9 there leaves: both stopped, that journal, ACTIVE, markers.
	require.NoError(t, h.Store.SaveOp(h.Ctx(), crashed))
	require.NoError(t, h.Store.SaveActive(h.Ctx(), active))
	require.NoError(t, h.Store.SaveMarker(h.Ctx(), markers[0]))
	require.NoError(t, h.Runtime.StopContainer(h.Ctx(), "c-old", time.Second))
	h.Runtime.AddContainer("c-new", core.ContainerState{}, map[int]int{8080: 18080})
	require.NoError(t, h.Runtime.StopContainer(h.Ctx(), "c-new", time.Second))

	h.Reset()
	require.NoError(t, pass(h))
	assert.Equal(t, 1, maxRunning(h), "never both running")
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.Nil(t, a.Services["web"].HoldUntil)
	assert.True(t, h.Runtime.Running("c-old"))
	assert.False(t, h.Runtime.Exists("c-new"))
	assert.Len(t, h.LastRoute("blog", "web"), 1)
	assert.Empty(t, h.Store.Markers("blog"))
	assert.True(t, depLastOp(t, h).Terminal())
}

// TestR76_SequentialCrashBeforePublicationRestoresTheStandby: a crash
// after the old generation was stopped (kept as the standby) and the new
// one started, before publication, leaves ACTIVE naming the stopped old
// generation with its blocking replacement-pending marker; reconcile
// removes the unpublished candidate before it starts the old generation
// again, never both running.
func TestR76_SequentialCrashBeforePublicationRestoresTheStandby(t *testing.T) {
	h := seqMonitorHarness(t, 10, 0)
	var (
		crashed core.Operation
		active  core.Active
		markers []core.Marker
	)
	h.Runtime.Hook = func(_ context.Context, method, id string) error {
		if method == coretest.MStart && id == "c-new" && crashed.ID == "" {
			op, err := h.Store.LatestOp(context.Background(), "blog")
			require.NoError(t, err)
			crashed, markers = op, h.Store.Markers("blog")
			active, _ = h.Store.Active("blog")
		}
		return nil
	}
	_, err := depDeploy(t, h, engine.DeployRequest{}, withVolume(monitoredWeb(50*time.Millisecond)))
	require.NoError(t, err)
	require.NotEmpty(t, crashed.ID)
	h.Runtime.Hook = nil
	require.Equal(t, "c-old", active.Services["web"].Container)
	require.Len(t, markers, 1)
	assert.Equal(t, core.MarkerReplacementPending, markers[0].Reason)

	// What a kill -9 right after the candidate started leaves.
	require.NoError(t, h.Store.SaveOp(h.Ctx(), crashed))
	require.NoError(t, h.Store.SaveActive(h.Ctx(), active))
	require.NoError(t, h.Store.SaveMarker(h.Ctx(), markers[0]))
	h.Runtime.AddContainer("c-old", core.ContainerState{}, map[int]int{8080: 17000})
	require.NoError(t, h.Runtime.StopContainer(h.Ctx(), "c-old", time.Second))
	require.True(t, h.Runtime.Running("c-new"))

	h.Reset()
	require.NoError(t, pass(h))
	assert.Equal(t, 1, maxRunning(h, "c-new"), "the candidate goes before the old generation starts")
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.True(t, h.Runtime.Running("c-old"))
	assert.False(t, h.Runtime.Exists("c-new"))
	assert.Empty(t, h.Store.Markers("blog"))
	assert.True(t, depLastOp(t, h).Terminal())
}
