package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/schedule"
)

// JobInfo is one job as `jobs ls` shows it.
type JobInfo struct {
	Name     string        `json:"name"`
	Service  string        `json:"service"`
	Schedule string        `json:"schedule"`
	Command  []string      `json:"command"`
	Timeout  core.Duration `json:"timeout"`
	// LastRun is the job's newest run (nil: it never ran).
	LastRun *LastRun `json:"last_run,omitempty"`
	// Next is when the watcher runs it next (zero when it cannot run now:
	// Blocked says why).
	Next    time.Time `json:"next_run,omitzero"`
	Blocked string    `json:"blocked,omitempty"`
}

// LastRun is a job's newest run.
type LastRun struct {
	Op         string       `json:"op"`
	StartedAt  time.Time    `json:"started_at"`
	FinishedAt time.Time    `json:"finished_at,omitzero"`
	Outcome    core.Outcome `json:"outcome,omitempty"` // "" while it runs
	ExitCode   *int         `json:"exit_code,omitempty"`
}

// List returns app's jobs, by name, with their last run and next run.
// An unknown app wraps ErrNotFound; an app that serves nothing
// ErrConflict.
func (e *Engine) List(ctx context.Context, app string) ([]JobInfo, error) {
	a, err := e.loadJobs(ctx, app)
	if err != nil {
		return nil, err
	}
	last, err := e.lastRuns(ctx, app)
	if err != nil {
		return nil, err
	}
	out := []JobInfo{}
	for _, j := range a.rev.Spec.Jobs {
		info := JobInfo{Name: j.Name, Service: j.Service, Schedule: j.Schedule, Command: j.Command, Timeout: core.Duration(Timeout(j))}
		var lastStart time.Time
		if op, ok := last[j.Name]; ok {
			info.LastRun = &LastRun{Op: op.ID, StartedAt: op.StartedAt, FinishedAt: op.FinishedAt, Outcome: op.Outcome}
			if code, ok := ExitCode(op); ok {
				info.LastRun.ExitCode = &code
			}
			lastStart = op.StartedAt
		}
		if _, err := a.serving(j); err != nil {
			info.Blocked = err.Error()
		} else if s, err := schedule.Parse(j.Schedule); err == nil {
			_, info.Next = s.Due(lastStart, a.since(), e.Now())
		}
		out = append(out, info)
	}
	return out, nil
}

// LastRunOf returns the newest run of app's job (ErrNotFound when it
// never ran, naming how to run it).
func (e *Engine) LastRunOf(ctx context.Context, app, job string) (core.Operation, error) {
	if _, err := e.Store.LoadApp(ctx, app); errors.Is(err, core.ErrNotFound) {
		return core.Operation{}, fmt.Errorf("%w: app %q not found (deploy it with: docker gordon deploy -f FILE)", core.ErrNotFound, app)
	}
	last, err := e.lastRuns(ctx, app)
	if err != nil {
		return core.Operation{}, err
	}
	op, ok := last[job]
	if !ok {
		return core.Operation{}, fmt.Errorf("%w: job %s of app %s has not run yet (run it now with: docker gordon jobs run %s %s)", core.ErrNotFound, job, app, app, job)
	}
	return op, nil
}
