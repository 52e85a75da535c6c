package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/engine/scalezero"
)

func loadActive(t *testing.T, s core.Store, app string) core.Active {
	t.Helper()
	a, err := s.LoadActive(context.Background(), app)
	require.NoError(t, err)
	return a
}

// R81 (sleep): sleep stops every instance (not removed) with its grace,
// records the service asleep, journals op "sleep", and routes the host
// as a waking route; reconcile and boot keep it asleep; wake starts,
// probes and routes it again, journaled as op "wake".
func TestR81_SleepStopsWakeStartsAndReconcileKeepsItAsleep(t *testing.T) {
	h := lcSeed(t, "c1", 18080, 3*time.Second)
	ctx := context.Background()
	res, err := h.Engine.Sleep(ctx, engine.SleepRequest{App: "blog", Reason: "idle 6s"})
	require.NoError(t, err)
	require.NotNil(t, res)
	assert.Equal(t, scalezero.OpSleep, res.Op.Kind)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.True(t, h.Runtime.Exists("c1"), "stopped, not removed")
	assert.False(t, h.Runtime.Running("c1"))
	stops := h.Runtime.Stops()
	require.NotEmpty(t, stops)
	assert.Equal(t, 3*time.Second, stops[len(stops)-1].Grace)
	a := loadActive(t, h.Store, "blog")
	require.NotNil(t, a.Services["web"].AsleepSince)
	assert.Empty(t, a.Services["web"].BackendBinds)
	g := h.Traffic.Last()
	require.Len(t, g.HTTP, 1)
	require.NotNil(t, g.HTTP[0].Asleep, "the host wakes the service")
	assert.Empty(t, g.HTTP[0].Backends)

	again, err := h.Engine.Sleep(ctx, engine.SleepRequest{App: "blog"})
	require.NoError(t, err)
	assert.Nil(t, again, "nothing awake: nothing journaled")

	_, err = h.Engine.Reconcile(ctx, []string{"blog"})
	require.NoError(t, err)
	assert.False(t, h.Runtime.Running("c1"), "the periodic pass never starts a sleeping service")
	_, err = h.Engine.Boot(ctx)
	require.NoError(t, err)
	assert.False(t, h.Runtime.Running("c1"), "boot keeps it asleep")
	require.NotNil(t, loadActive(t, h.Store, "blog").Services["web"].AsleepSince)

	res, err = h.Engine.Wake(ctx, engine.SleepRequest{App: "blog", Reason: "first request at the edge"})
	require.NoError(t, err)
	require.NotNil(t, res)
	assert.Equal(t, scalezero.OpWake, res.Op.Kind)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Contains(t, res.Op.Steps[0].Detail, "woke in")
	assert.True(t, h.Runtime.Running("c1"))
	a = loadActive(t, h.Store, "blog")
	assert.Nil(t, a.Services["web"].AsleepSince)
	assert.Equal(t, map[int]int{8080: 18080}, a.Services["web"].BackendBinds)
	g = h.Traffic.Last()
	require.Len(t, g.HTTP, 1)
	assert.Nil(t, g.HTTP[0].Asleep)
	assert.Len(t, g.HTTP[0].Backends, 1)
	none, err := h.Engine.Wake(ctx, engine.SleepRequest{App: "blog"})
	require.NoError(t, err)
	assert.Nil(t, none, "nothing asleep: nothing journaled")
}

// R81 (speed): a wake's probe attempts stay wakeProbeEvery apart rather
// than ramping to a deploy's interval: held requests wait on it. Within a
// 1 s readiness budget, a deploy's ramp (50, 100, 200, 400 ms pauses)
// makes 5 attempts; a service that answers on the tenth still wakes.
func TestR81_WakeProbesAtItsOwnCadenceNotTheDeploys(t *testing.T) {
	h := lcSeed(t, "c1", 18080, 0)
	ctx := context.Background()
	_, err := h.Engine.Sleep(ctx, engine.SleepRequest{App: "blog"})
	require.NoError(t, err)
	probes := 0
	h.Prober.CheckFn = func(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
		probes++
		if probes < 10 {
			return core.ProbeResult{Detail: "dial tcp: connection refused"}, nil
		}
		return core.ProbeResult{Ready: true}, nil
	}
	res, err := h.Engine.Wake(ctx, engine.SleepRequest{App: "blog"})
	require.NoError(t, err)
	require.NotNil(t, res)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, 10, probes)
}

// R81 (wake fails): a service that does not wake is recorded awake
// without binds, so its host answers 503 at once (an unavailable route)
// instead of being held to the bound.
func TestR81_FailedWakeEndsTheHoldWith503(t *testing.T) {
	h := lcSeed(t, "c1", 18080, 0)
	ctx := context.Background()
	_, err := h.Engine.Sleep(ctx, engine.SleepRequest{App: "blog"})
	require.NoError(t, err)
	h.Runtime.Fail("start", "c1", assert.AnError, 1)
	res, err := h.Engine.Wake(ctx, engine.SleepRequest{App: "blog"})
	require.Error(t, err)
	require.NotNil(t, res)
	assert.Equal(t, core.OutcomeFailed, res.Outcome)
	g := h.Traffic.Last()
	require.Len(t, g.HTTP, 1)
	assert.True(t, g.HTTP[0].Unavailable, "503 at once, with Retry-After")
	assert.Nil(t, loadActive(t, h.Store, "blog").Services["web"].AsleepSince)
}

// R81 (other verbs): restart wakes a sleeping app first; stop ends a
// sleep, so start brings every service back.
func TestR81_RestartWakesFirstAndStopEndsTheSleep(t *testing.T) {
	h := lcSeed(t, "c1", 18080, 0)
	ctx := context.Background()
	_, err := h.Engine.Sleep(ctx, engine.SleepRequest{App: "blog"})
	require.NoError(t, err)
	_, err = h.Engine.Restart(ctx, engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	ops, err := h.Store.ListOps(ctx, "blog")
	require.NoError(t, err)
	var kinds []string
	for _, op := range ops {
		kinds = append(kinds, op.Kind)
	}
	assert.Contains(t, kinds, scalezero.OpWake)
	assert.Nil(t, loadActive(t, h.Store, "blog").Services["web"].AsleepSince)

	_, err = h.Engine.Sleep(ctx, engine.SleepRequest{App: "blog"})
	require.NoError(t, err)
	_, err = h.Engine.Stop(ctx, engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Nil(t, loadActive(t, h.Store, "blog").Services["web"].AsleepSince)
	_, err = h.Engine.Wake(ctx, engine.SleepRequest{App: "blog"})
	require.ErrorIs(t, err, core.ErrConflict, "a stopped app does not wake")
}

// R81 (status): a sleeping app's status says asleep, since when, and
// names no problem.
func TestR81_StatusSaysAsleepSince(t *testing.T) {
	h := lcSeed(t, "c1", 18080, 0)
	ctx := context.Background()
	_, err := h.Engine.Sleep(ctx, engine.SleepRequest{App: "blog"})
	require.NoError(t, err)
	st, err := h.Engine.Status(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, engine.AppStateAsleep, st.State)
	assert.Empty(t, st.Problems)
	require.Len(t, st.Services, 1)
	require.NotNil(t, st.Services[0].AsleepSince)
	assert.Equal(t, "asleep", st.Services[0].State)
}
