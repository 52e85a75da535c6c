package engine

import (
	"context"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/jobs"
)

// The jobs API's types.
type (
	JobInfo       = jobs.JobInfo
	JobLastRun    = jobs.LastRun
	JobRunRequest = jobs.RunRequest
	JobRunResult  = jobs.RunResult
	JobReport     = jobs.Report
)

// jobs is the jobs layer over this engine's flows.
func (e *Engine) jobs() *jobs.Engine {
	return &jobs.Engine{Engine: e.flows().Engine.Engine}
}

// RunJob: see jobs.Engine.Run.
func (e *Engine) RunJob(ctx context.Context, req JobRunRequest) (*JobRunResult, error) {
	return e.jobs().Run(ctx, req)
}

// Jobs: see jobs.Engine.List.
func (e *Engine) Jobs(ctx context.Context, app string) ([]JobInfo, error) {
	return e.jobs().List(ctx, app)
}

// LastJobRun: see jobs.Engine.LastRunOf.
func (e *Engine) LastJobRun(ctx context.Context, app, job string) (core.Operation, error) {
	return e.jobs().LastRunOf(ctx, app, job)
}

// TickJobs starts the due runs of the jobs of apps (none: every app) with
// this engine's one scheduler and returns at once; done gets each run's
// report when it ends (see jobs.Scheduler.Tick).
func (e *Engine) TickJobs(ctx context.Context, apps []string, done func(JobReport)) {
	e.scheduler().Tick(ctx, e.jobs(), apps, done)
}

// WaitJobs waits for the runs TickJobs started to end.
func (e *Engine) WaitJobs() { e.scheduler().Wait() }

func (e *Engine) scheduler() *jobs.Scheduler {
	e.schedOnce.Do(func() { e.sched = jobs.NewScheduler() })
	return e.sched
}

// JobLogs: see jobs.Engine.Logs.
func (e *Engine) JobLogs(ctx context.Context, app, job string, opts core.LogOptions, fn func(core.LogLine) error) (core.Operation, error) {
	return e.jobs().Logs(ctx, app, job, opts, fn)
}

// JobName is jobs.NameOf: the job a job op ran ("" for other ops).
func JobName(op core.Operation) string { return jobs.NameOf(op) }
