package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// hookKinds are the effect kinds hook orders are asserted on.
var hookKinds = []string{"create", "start", "ready", "exec", "publish-active", "stop", "remove"}

// hookWeb is depNewWeb with the given hooks.
func hookWeb(before, after []string, timeout time.Duration) core.ServiceSpec {
	s := depNewWeb(0)
	s.Hooks = &core.Hooks{}
	if before != nil {
		s.Hooks.BeforeSwitch = &core.HookCommand{Command: before, Timeout: core.Duration(timeout)}
	}
	if after != nil {
		s.Hooks.AfterSwitch = &core.HookCommand{Command: after, Timeout: core.Duration(timeout)}
	}
	return s
}

// exitWith scripts every exec: argv[0] "fail" exits 3 after writing two
// lines, anything else writes one line and exits 0.
func exitWith(ctx context.Context, id string, x core.ExecSpec, out func(string)) (int, error) {
	if x.Cmd[0] == "fail" {
		out("migrating")
		out("error: relation exists")
		return 3, nil
	}
	out("ok from " + id)
	return 0, nil
}

func hookEnv(x core.ExecSpec) map[string]string {
	env := map[string]string{}
	for _, kv := range x.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// TestR72_BeforeSwitchRunsInReadyCandidateBeforeTheSwitch: before_switch
// runs once in the ready candidate, before ACTIVE names it and before the
// old generation is stopped; after_switch runs in the new generation after
// the switch. Both get the GORDON_* environment and are journaled with
// their exit status and duration.
func TestR72_BeforeSwitchRunsInReadyCandidateBeforeTheSwitch(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.SetExec(exitWith)
	old, ok := h.Store.Active("blog")
	require.True(t, ok)
	prevRev := old.Services["web"].EffectiveRevision
	require.NotEmpty(t, prevRev)

	res, err := depDeploy(t, h, engine.DeployRequest{}, hookWeb([]string{"bin/migrate"}, []string{"bin/warm"}, 0))
	require.NoError(t, err)

	assert.Equal(t, []string{"create c-new", "start c-new", "ready c-new", "exec c-new", "publish-active blog", "exec c-new", "stop c-old", "remove c-old"},
		h.Events.Seq(hookKinds...))
	execs := h.Runtime.Execs()
	require.Len(t, execs, 2)
	assert.Equal(t, []string{"bin/migrate"}, execs[0].Spec.Cmd)
	assert.Equal(t, []string{"bin/warm"}, execs[1].Spec.Cmd)
	env := hookEnv(execs[0].Spec)
	assert.Equal(t, "blog", env[engine.EnvHookApp])
	assert.Equal(t, "web", env[engine.EnvHookService])
	assert.Equal(t, res.Op.Revision, env[engine.EnvHookRevision])
	assert.Equal(t, prevRev, env[engine.EnvHookPreviousRevision])
	assert.NotEqual(t, env[engine.EnvHookRevision], env[engine.EnvHookPreviousRevision])

	op := depLastOp(t, h)
	assert.Equal(t, core.OutcomeSuccess, op.Outcome)
	for _, name := range []string{core.HookBeforeSwitch, core.HookAfterSwitch} {
		st := op.Step(engine.HookStepID("web", name))
		require.NotNil(t, st, name)
		assert.Equal(t, core.StepSucceeded, st.State, name)
		assert.Regexp(t, `^`+name+` in c-new: exit 0 after \S+$`, st.Detail, name)
		assert.Contains(t, st.Phases, "hook", name)
	}
	require.Len(t, res.Services, 1, "a hook step is not a service result")
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)

	var lines []string
	for _, ev := range h.Progress() {
		if ev.Phase == engine.PhaseHook {
			lines = append(lines, ev.Service+" "+ev.Detail)
		}
	}
	assert.Contains(t, lines, "web before_switch: ok from c-new", "hook output goes to progress, prefixed with service and hook")
}

// TestR72_BeforeSwitchFailureKeepsOldServing: a before_switch hook that
// exits non-zero fails the deploy; the candidate is removed, ACTIVE and
// the routes still name the old generation, and the journal keeps the
// hook's exit status and output tail.
func TestR72_BeforeSwitchFailureKeepsOldServing(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.SetExec(exitWith)

	res, err := depDeploy(t, h, engine.DeployRequest{}, hookWeb([]string{"fail"}, []string{"bin/warm"}, 0))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), `before_switch hook "fail" in c-new exited with status 3`)

	assert.Equal(t, []string{"create c-new", "start c-new", "ready c-new", "exec c-new", "remove c-new"}, h.Events.Seq(hookKinds...))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.True(t, h.Runtime.Running("c-old"))
	assert.False(t, slices.Contains(h.Runtime.Containers(), "c-new"), "the candidate is removed")
	assert.Len(t, h.Runtime.Execs(), 1, "after_switch never runs")
	assert.Empty(t, h.Store.Markers("blog"))

	op := depLastOp(t, h)
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	st := op.Step(engine.HookStepID("web", core.HookBeforeSwitch))
	require.NotNil(t, st)
	assert.Equal(t, core.StepFailed, st.State)
	assert.Regexp(t, `^before_switch in c-new: exit 3 after \S+$`, st.Detail)
	assert.Equal(t, []string{"migrating", "error: relation exists"}, st.Diagnostics)
	assert.Equal(t, core.StepFailed, op.Step("service.web.replace").State)
	require.Len(t, res.Services, 1)
	assert.Equal(t, engine.ResultFailed, res.Services[0].Result)
}

// TestR72_AfterSwitchFailureIsReported: an after_switch hook that fails
// leaves the switch in place (the new generation serves, the old one is
// retired) and the deploy reports it: an error, outcome partial, a
// warning, and the failed hook step in the journal.
func TestR72_AfterSwitchFailureIsReported(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.SetExec(exitWith)

	res, err := depDeploy(t, h, engine.DeployRequest{}, hookWeb(nil, []string{"fail"}, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "after_switch hook failed")
	assert.Contains(t, err.Error(), "the new generation c-new serves")

	assert.Equal(t, []string{"create c-new", "start c-new", "ready c-new", "publish-active blog", "exec c-new", "stop c-old", "remove c-old"}, h.Events.Seq(hookKinds...))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.Equal(t, core.OutcomePartial, res.Outcome)
	op := depLastOp(t, h)
	assert.Equal(t, core.OutcomePartial, op.Outcome)
	assert.Equal(t, core.StepFailed, op.Step(engine.HookStepID("web", core.HookAfterSwitch)).State)
	assert.Equal(t, core.StepSucceeded, op.Step("service.web.replace").State)
	require.Len(t, op.Warnings, 1)
	assert.Contains(t, op.Warnings[0].Detail, "after_switch hook failed")
}

// TestR72_HookTimeout: a hook that does not exit within its timeout fails
// like a non-zero exit and says which timeout to raise.
func TestR72_HookTimeout(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.SetExec(func(ctx context.Context, _ string, _ core.ExecSpec, _ func(string)) (int, error) {
		<-ctx.Done()
		return -1, ctx.Err()
	})

	_, err := depDeploy(t, h, engine.DeployRequest{}, hookWeb([]string{"sleep", "1d"}, nil, 20*time.Millisecond))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `before_switch hook "sleep 1d" in c-new did not exit within its timeout 20ms; make it faster or raise [services.web.hooks] timeout`)
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.Equal(t, core.StepFailed, depLastOp(t, h).Step(engine.HookStepID("web", core.HookBeforeSwitch)).State)
}

// TestR72_BeforeSwitchRunsOnceWithReplicas: with replicas the hook runs
// once per deploy, in the primary, after every instance is ready.
func TestR72_BeforeSwitchRunsOnceWithReplicas(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-a", "c-b", "c-c"}
	h.Runtime.SetExec(exitWith)
	s := hookWeb([]string{"bin/migrate"}, nil, 0)
	s.Replicas = 3

	_, err := depDeploy(t, h, engine.DeployRequest{}, s)
	require.NoError(t, err)
	execs := h.Runtime.Execs()
	require.Len(t, execs, 1)
	a, _ := h.Store.Active("blog")
	primary := a.Services["web"].Container
	assert.Equal(t, primary, execs[0].ID, "the hook runs in the primary instance")
	for _, id := range []string{"c-a", "c-b", "c-c"} {
		assert.Less(t, h.Events.Index("ready", id), h.Events.Index("exec", primary), id)
	}
}

// TestR72_BeforeSwitchFailureWithReplicasRemovesEveryInstance: a failed
// hook removes every instance of the candidate.
func TestR72_BeforeSwitchFailureWithReplicasRemovesEveryInstance(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-a", "c-b"}
	h.Runtime.SetExec(exitWith)
	s := hookWeb([]string{"fail"}, nil, 0)
	s.Replicas = 2

	_, err := depDeploy(t, h, engine.DeployRequest{}, s)
	require.Error(t, err)
	assert.Equal(t, []string{"c-old"}, h.Runtime.Containers())
}

// TestR72_SequentialBeforeSwitchRunsBeforeTrafficIsReleased: for a
// single-writer service the hook runs after the new container is ready and
// before ACTIVE names it (the held traffic is released only then).
func TestR72_SequentialBeforeSwitchRunsBeforeTrafficIsReleased(t *testing.T) {
	vol := func(s core.ServiceSpec) core.ServiceSpec {
		s.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
		return s
	}
	h := depSeedWeb(t, vol(coretest.WebSpec(0)))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.SetExec(exitWith)

	_, err := depDeploy(t, h, engine.DeployRequest{}, vol(hookWeb([]string{"bin/migrate"}, nil, 0)))
	require.NoError(t, err)
	exec := h.Events.Index("exec", "c-new")
	require.GreaterOrEqual(t, exec, 0)
	assert.Less(t, h.Events.Index("remove", "c-old"), exec, "sequential: the old container is gone first")
	assert.Less(t, h.Events.Index("start", "c-new"), exec)
	assert.Less(t, exec, h.Events.LastIndex("publish-active", "blog"), "the hook runs before ACTIVE names the new container")
}

// TestR72_NoExecRuntimeRefusesHooksBeforeAnyChange: a runtime that cannot
// exec fails the deploy in preflight, before anything is created.
func TestR72_NoExecRuntimeRefusesHooksBeforeAnyChange(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Engine.Runtime = noExec{h.Runtime}

	_, err := depDeploy(t, h, engine.DeployRequest{}, hookWeb([]string{"bin/migrate"}, nil, 0))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "cannot exec commands in containers")
	assert.Equal(t, 0, h.Events.Count("create", ""))
}

// noExec hides the fake's ContainerExecer.
type noExec struct{ core.Runtime }

// TestR72_CrashDuringBeforeSwitchConverges: a crash while before_switch
// runs leaves the hook step unfinished and the candidate journaled but
// never published; reconciliation removes the candidate, keeps the old
// generation serving and fails the op.
func TestR72_CrashDuringBeforeSwitchConverges(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	var crashed core.Operation
	h.Runtime.SetExec(func(ctx context.Context, _ string, _ core.ExecSpec, _ func(string)) (int, error) {
		op, err := h.Store.LatestOp(ctx, "blog")
		if err != nil {
			return -1, err
		}
		crashed = op
		return -1, errors.New("the CLI died here")
	})
	_, err := depDeploy(t, h, engine.DeployRequest{}, hookWeb([]string{"bin/migrate"}, nil, 0))
	require.Error(t, err)

	// What a kill -9 during the hook leaves: the journal as it was while the
	// hook ran, and the candidate still running.
	require.False(t, crashed.Terminal())
	hook := crashed.Step(engine.HookStepID("web", core.HookBeforeSwitch))
	require.NotNil(t, hook)
	assert.Equal(t, core.StepPending, hook.State)
	assert.Equal(t, "c-new", crashed.Step("service.web.replace").After)
	require.NoError(t, h.Store.SaveOp(h.Ctx(), crashed))
	h.Runtime.AddContainer("c-new", core.ContainerState{}, map[int]int{8080: 18080})

	h.Reset()
	require.NoError(t, pass(h))
	assert.False(t, slices.Contains(h.Runtime.Containers(), "c-new"), "the unswitched candidate is removed")
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.True(t, h.Runtime.Running("c-old"))
	assert.Equal(t, []int{17000}, h.LastRoute("blog", "web"))
	op := depLastOp(t, h)
	assert.True(t, op.Terminal())
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
}

// TestR72_PostStartRunsInEveryInstanceBeforeReadiness: compose's
// post_start runs in each new instance after it started and before it is
// probed; a failure fails the start, the candidate is removed and the old
// generation keeps serving.
func TestR72_PostStartRunsInEveryInstanceBeforeReadiness(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-a", "c-b"}
	h.Runtime.SetExec(exitWith)
	s := depNewWeb(0)
	s.Replicas = 2
	s.Hooks = &core.Hooks{PostStart: []core.HookCommand{{Command: []string{"/app", "warm"}, User: "1000", Env: map[string]string{"MODE": "warm"}}}}

	_, err := depDeploy(t, h, engine.DeployRequest{}, s)
	require.NoError(t, err)
	execs := h.Runtime.Execs()
	require.Len(t, execs, 2)
	for _, id := range []string{"c-a", "c-b"} {
		x := h.Events.Index("exec", id)
		require.GreaterOrEqual(t, x, 0, id)
		assert.Less(t, h.Events.Index("start", id), x, id)
		assert.Less(t, x, h.Events.Index("ready", id), id)
	}
	assert.Equal(t, "1000", execs[0].Spec.User)
	env := hookEnv(execs[0].Spec)
	assert.Equal(t, "warm", env["MODE"])
	assert.Equal(t, "blog", env[engine.EnvHookApp])

	h2 := depSeedWeb(t, coretest.WebSpec(0))
	h2.Runtime.NextIDs = []string{"c-new"}
	h2.Runtime.SetExec(exitWith)
	s2 := depNewWeb(0)
	s2.Hooks = &core.Hooks{PostStart: []core.HookCommand{{Command: []string{"fail"}}}}
	res, err := depDeploy(t, h2, engine.DeployRequest{}, s2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `post_start hook "fail" in c-new exited with status 3`)
	assert.Equal(t, []string{"migrating", "error: relation exists"}, res.Services[0].Diagnostics)
	assert.Equal(t, []string{"c-old"}, h2.Runtime.Containers())
	assert.Equal(t, -1, h2.Events.Index("ready", "c-new"), "never probed")
}

// TestR72_PreStopRunsBeforeTheStopSignalBestEffort: compose's pre_stop
// runs in the retired container before it is stopped; a failure is a
// warning and the container is stopped anyway.
func TestR72_PreStopRunsBeforeTheStopSignalBestEffort(t *testing.T) {
	old := coretest.WebSpec(0)
	old.Hooks = &core.Hooks{PreStop: []core.HookCommand{{Command: []string{"fail"}}}}
	h := depSeedWeb(t, old)
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.SetExec(exitWith)

	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)
	x := h.Events.Index("exec", "c-old")
	require.GreaterOrEqual(t, x, 0)
	assert.Less(t, h.Events.Index("publish-active", "blog"), x)
	assert.Less(t, x, h.Events.Index("stop", "c-old"))
	assert.False(t, slices.Contains(h.Runtime.Containers(), "c-old"))
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	require.Len(t, res.Services[0].Warnings, 1)
	assert.Contains(t, res.Services[0].Warnings[0].Detail, `pre_stop hook failed (stopped anyway): state conflict: pre_stop hook "fail" in c-old exited with status 3`)
}

// TestR72_CrashDuringAfterSwitchConverges: a crash while after_switch runs
// leaves the switch done (ACTIVE names the new generation) and the old one
// running under its retirement-pending marker; reconciliation keeps the
// new generation serving, retires the old one and fails the op (the hook's
// outcome is unknown).
func TestR72_CrashDuringAfterSwitchConverges(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18080}}
	var crashed core.Operation
	var markers []core.Marker
	h.Runtime.SetExec(func(ctx context.Context, _ string, _ core.ExecSpec, _ func(string)) (int, error) {
		op, err := h.Store.LatestOp(ctx, "blog")
		if err != nil {
			return -1, err
		}
		crashed, markers = op, h.Store.Markers("blog")
		return -1, errors.New("the CLI died here")
	})
	_, err := depDeploy(t, h, engine.DeployRequest{}, hookWeb(nil, []string{"bin/warm"}, 0))
	require.Error(t, err)

	require.False(t, crashed.Terminal())
	assert.Equal(t, core.StepPending, crashed.Step(engine.HookStepID("web", core.HookAfterSwitch)).State)
	require.Len(t, markers, 1)
	assert.Equal(t, core.MarkerRetirementPending, markers[0].Reason)
	require.NoError(t, h.Store.SaveOp(h.Ctx(), crashed))
	h.Runtime.AddContainer("c-old", core.ContainerState{}, map[int]int{8080: 17000})
	require.NoError(t, h.Store.SaveMarker(h.Ctx(), markers[0]))

	h.Reset()
	require.NoError(t, pass(h))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.Equal(t, []int{18080}, h.LastRoute("blog", "web"))
	assert.False(t, slices.Contains(h.Runtime.Containers(), "c-old"), "the superseded generation is retired")
	assert.Empty(t, h.Store.Markers("blog"))
	op := depLastOp(t, h)
	assert.True(t, op.Terminal())
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
}

// TestR72_HookStepIDs: a hook step is told apart from a service step, also
// for a service named "hook".
func TestR72_HookStepIDs(t *testing.T) {
	assert.Equal(t, "service.web.hook.before_switch", engine.HookStepID("web", core.HookBeforeSwitch))
	assert.True(t, engine.IsHookStep(engine.HookStepID("hook", core.HookAfterSwitch)))
	assert.False(t, engine.IsHookStep(engine.ServiceStepID("hook", "replace")))
	assert.False(t, engine.IsHookStep(engine.StepPreflight))
}
