package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/engine/jobs"
)

// jobsApp seeds blog serving web (container "web-1") with one job,
// cleanup, on web at schedule.
func jobsApp(t *testing.T, schedule string) *coretest.Harness {
	h := coretest.NewEngine(t)
	web := coretest.WebSpec(0)
	web.Secrets = []core.SecretRef{{Env: "API_KEY", Name: "api-key"}}
	spec := coretest.BlogApp(web)
	spec.Env = map[string]string{"APP_MODE": "prod"}
	spec.Jobs = []core.JobSpec{{Name: "cleanup", Service: "web", Schedule: schedule, Command: []string{"./manage", "cleanup"}}}
	h.SeedServing("blog", spec, map[string]string{"web": "web-1"}, map[string]map[int]int{"web": {8080: 30001}})
	require.NoError(t, h.Store.SetSecret(context.Background(), "blog", "web", "api-key", []byte("s3cret")))
	return h
}

// jobContainer waits until the n-th job container (1-based) was created
// and returns its ID and spec.
func jobContainer(t *testing.T, h *coretest.Harness, n int) (string, core.ContainerSpec) {
	t.Helper()
	var spec core.ContainerSpec
	require.Eventually(t, func() bool {
		var found []core.ContainerSpec
		for _, c := range h.Runtime.Created() {
			if c.Labels[core.LabelRole] == jobs.RoleJob {
				found = append(found, c)
			}
		}
		if len(found) < n {
			return false
		}
		spec = found[n-1]
		return true
	}, 5*time.Second, time.Millisecond)
	var id string
	require.Eventually(t, func() bool {
		for _, cid := range h.Runtime.Containers() {
			if st, ok := h.Runtime.State(cid); ok && st.Name == spec.Name && st.Status == core.StatusRunning {
				id = cid
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond)
	return id, spec
}

type runOutcome struct {
	res *engine.JobRunResult
	err error
}

func runJob(h *coretest.Harness, trigger string) chan runOutcome {
	ch := make(chan runOutcome, 1)
	go func() {
		res, err := h.Engine.RunJob(context.Background(), engine.JobRunRequest{App: "blog", Job: "cleanup", Trigger: trigger})
		ch <- runOutcome{res, err}
	}()
	return ch
}

// TestJobs_RunIsANewContainerOfTheServingGenerationJournaledAsAJobOp: a
// run creates a container of web's serving image with the app's env, on
// the app network, with the job's command and no alias or port; the op
// of kind job records the container, exit 0, the output and success, and
// the container is removed.
func TestJobs_RunIsANewContainerOfTheServingGenerationJournaledAsAJobOp(t *testing.T) {
	h := jobsApp(t, "@every 1h")
	done := runJob(h, jobs.TriggerManual)
	id, spec := jobContainer(t, h, 1)
	assert.Equal(t, []string{"./manage", "cleanup"}, spec.Cmd)
	assert.Equal(t, "gordon-blog", spec.Network)
	assert.Empty(t, spec.Aliases, "a run answers to none of the service's names")
	assert.Empty(t, spec.Ports)
	assert.Contains(t, spec.Env, "APP_MODE=prod")
	assert.Contains(t, spec.Env, "API_KEY=s3cret", "the service's secrets as they are now")
	assert.Equal(t, "cleanup", spec.Labels[jobs.LabelJob])
	assert.Equal(t, "job-cleanup", spec.Hostname, "not the service name, which must reach the service")
	active, err := h.Store.LoadActive(context.Background(), "blog")
	require.NoError(t, err)
	assert.Equal(t, active.Services["web"].Image, spec.Image, "the serving generation's image")

	h.Runtime.LogsFor(id, "removed 3 sessions", "done with s3cret")
	h.Runtime.SetExit(id, 0, false)
	out := <-done
	require.NoError(t, out.err)
	op := out.res.Op
	assert.Equal(t, jobs.Kind, op.VerbOrKind())
	assert.Equal(t, core.OutcomeSuccess, op.Outcome)
	code, ok := jobs.ExitCode(op)
	assert.True(t, ok)
	assert.Equal(t, 0, code)
	assert.Equal(t, []string{"removed 3 sessions", "done with ****"}, jobs.Output(op), "secret values are redacted")
	assert.Equal(t, id, jobs.Container(op))
	assert.False(t, h.Runtime.Exists(id), "the run's container is removed")

	stored, err := h.Store.LoadOp(context.Background(), "blog", op.ID)
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, stored.Outcome)
	latest, err := h.Store.LatestOp(context.Background(), "blog")
	if err == nil {
		assert.NotEqual(t, op.ID, latest.ID, "a job op never becomes the app's latest op")
	}
}

// TestJobs_FailingCommandFailsTheOpWithItsExitStatus.
func TestJobs_FailingCommandFailsTheOpWithItsExitStatus(t *testing.T) {
	h := jobsApp(t, "@every 1h")
	done := runJob(h, jobs.TriggerManual)
	id, _ := jobContainer(t, h, 1)
	h.Runtime.LogsFor(id, "error: no such table")
	h.Runtime.SetExit(id, 3, false)
	out := <-done
	require.NoError(t, out.err, "a run that ran is not an error: its op says how it ended")
	assert.Equal(t, core.OutcomeFailed, out.res.Op.Outcome)
	code, ok := jobs.ExitCode(out.res.Op)
	assert.True(t, ok)
	assert.Equal(t, 3, code)
	assert.Contains(t, out.res.Op.Steps[0].Error, "exited with status 3")
}

// TestJobs_SkipWhileTheLastRunIsStillGoing: a second run while the first
// is going runs nothing, names the running op and is a conflict; once the
// first ended, a run goes.
func TestJobs_SkipWhileTheLastRunIsStillGoing(t *testing.T) {
	h := jobsApp(t, "@every 1h")
	done := runJob(h, jobs.TriggerManual)
	id, _ := jobContainer(t, h, 1)

	res, err := h.Engine.RunJob(h.Ctx(), engine.JobRunRequest{App: "blog", Job: "cleanup"})
	require.ErrorIs(t, err, core.ErrConflict)
	require.NotNil(t, res)
	assert.Contains(t, res.Skipped, "still going")
	assert.Contains(t, err.Error(), "a job runs one at a time")
	assert.Equal(t, 1, countJobContainers(h), "nothing ran")

	h.Runtime.SetExit(id, 0, false)
	require.NoError(t, (<-done).err)
	again := runJob(h, jobs.TriggerManual)
	id2, _ := jobContainer(t, h, 2)
	h.Runtime.SetExit(id2, 0, false)
	out := <-again
	require.NoError(t, out.err)
	assert.Equal(t, core.OutcomeSuccess, out.res.Op.Outcome)
}

// TestJobs_RunWhoseProcessDiedIsFinalizedOrWaitedFor: a job op left
// pending by a dead process whose container still runs is still going
// (skip); once its container exited, the next run records that exit
// status first, then runs.
func TestJobs_RunWhoseProcessDiedIsFinalizedOrWaitedFor(t *testing.T) {
	h := jobsApp(t, "@every 1h")
	h.Runtime.AddContainer("orphan-1", core.ContainerState{Name: "gordon-blog-job-cleanup-dead", Status: core.StatusRunning, StartedAt: coretest.T0}, nil)
	h.Runtime.LogsFor("orphan-1", "half done with s3cret")
	dead := core.Operation{ID: "op-dead", Kind: jobs.Kind, App: "blog", StartedAt: coretest.T0,
		Steps: []core.Step{{ID: "job.cleanup", State: core.StepPending, Service: "web", After: "orphan-1", StartedAt: coretest.T0}}}
	require.NoError(t, h.Store.SaveOp(context.Background(), dead))

	res, err := h.Engine.RunJob(h.Ctx(), engine.JobRunRequest{App: "blog", Job: "cleanup"})
	require.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, res.Skipped, "still going in container orphan-1")

	h.Runtime.SetExit("orphan-1", 2, false)
	done := runJob(h, jobs.TriggerManual)
	id, _ := jobContainer(t, h, 1)
	h.Runtime.SetExit(id, 0, false)
	require.NoError(t, (<-done).err)

	old, err := h.Store.LoadOp(context.Background(), "blog", "op-dead")
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeFailed, old.Outcome)
	code, ok := jobs.ExitCode(old)
	assert.True(t, ok)
	assert.Equal(t, 2, code)
	assert.Equal(t, []string{"half done with ****"}, jobs.Output(old), "secret values are redacted from a dead run's output too")
	assert.False(t, h.Runtime.Exists("orphan-1"))
}

// TestJobs_RefusesAStoppedAppAnUnknownJobAndChangesNothing.
func TestJobs_RefusesAStoppedAppAnUnknownJobAndChangesNothing(t *testing.T) {
	h := jobsApp(t, "@every 1h")
	_, err := h.Engine.RunJob(h.Ctx(), engine.JobRunRequest{App: "blog", Job: "nope"})
	require.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "its jobs: cleanup")
	require.NoError(t, h.Store.SaveIntent(context.Background(), "blog", core.Intent{Stopped: true}))
	_, err = h.Engine.RunJob(h.Ctx(), engine.JobRunRequest{App: "blog", Job: "cleanup"})
	require.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "docker gordon start blog")
	ops, err := h.Store.ListOps(context.Background(), "blog")
	require.NoError(t, err)
	assert.Empty(t, ops, "a refusal journals nothing")
	assert.Zero(t, countJobContainers(h))
}

// TestJobs_SchedulerRunsADueJobOnceAndNotAgainWhileItRuns: a job at
// "@every 1m" is not due before a minute after its revision; at the
// minute a tick starts one run; further ticks while it runs start none;
// a minute after that run started, a tick starts the next; List shows
// the last run and the next.
func TestJobs_SchedulerRunsADueJobOnceAndNotAgainWhileItRuns(t *testing.T) {
	h := jobsApp(t, "@every 1m")
	reports := make(chan engine.JobReport, 4)
	done := func(r engine.JobReport) { reports <- r }
	ctx := h.Ctx()

	h.Clock.Set(coretest.T0.Add(30 * time.Second))
	h.Engine.TickJobs(ctx, nil, done)
	h.Engine.WaitJobs()
	assert.Zero(t, countJobContainers(h), "not due yet")

	h.Clock.Set(coretest.T0.Add(61 * time.Second))
	h.Engine.TickJobs(ctx, nil, done)
	id, _ := jobContainer(t, h, 1)
	h.Engine.TickJobs(ctx, nil, done)
	h.Engine.TickJobs(ctx, []string{"blog"}, done)
	assert.Equal(t, 1, countJobContainers(h), "not started again while it runs")

	h.Runtime.SetExit(id, 0, false)
	r := <-reports
	require.NoError(t, r.Err)
	assert.Equal(t, core.OutcomeSuccess, r.Result.Op.Outcome)
	assert.Equal(t, jobs.TriggerSchedule, strings.TrimSpace(triggerOf(r.Result.Op)))

	list, err := h.Engine.Jobs(ctx, "blog")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NotNil(t, list[0].LastRun)
	assert.Equal(t, core.OutcomeSuccess, list[0].LastRun.Outcome)
	assert.Equal(t, coretest.T0.Add(121*time.Second), list[0].Next)

	h.Engine.TickJobs(ctx, nil, done)
	h.Engine.WaitJobs()
	assert.Equal(t, 1, countJobContainers(h), "not due again before its interval")
	h.Clock.Set(coretest.T0.Add(122 * time.Second))
	h.Engine.TickJobs(ctx, nil, done)
	id2, _ := jobContainer(t, h, 2)
	h.Runtime.SetExit(id2, 0, false)
	require.NoError(t, (<-reports).Err)
}

// triggerOf reads what started a run from its step's Detail.
func triggerOf(op core.Operation) string {
	if strings.Contains(op.Steps[0].Detail, "run by the schedule") {
		return jobs.TriggerSchedule
	}
	return jobs.TriggerManual
}

func countJobContainers(h *coretest.Harness) int {
	return len(slices.DeleteFunc(h.Runtime.Created(), func(c core.ContainerSpec) bool { return c.Labels[core.LabelRole] != jobs.RoleJob }))
}

// A removed app runs nothing: `remove` force-removes the container of a
// job run still going, and that run ends failed.
func TestJobs_RemoveEndsARunStillGoing(t *testing.T) {
	h := jobsApp(t, "@every 1h")
	done := runJob(h, jobs.TriggerManual)
	id, _ := jobContainer(t, h, 1)
	_, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	_, ok := h.Runtime.State(id)
	assert.False(t, ok, "the run's container is gone")
	var out runOutcome
	select {
	case out = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the run goes on after its app was removed")
	}
	require.NotNil(t, out.res)
	assert.Equal(t, core.OutcomeFailed, out.res.Op.Outcome)
	assert.Contains(t, out.res.Op.Steps[0].Error, "was removed while it ran", "the run says what ended it, not the engine's lookup error")
}
