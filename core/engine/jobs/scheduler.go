package jobs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/schedule"
)

// Report is what the scheduler says of one run it started: the run's
// result once it ended, or the error that kept it from running.
type Report struct {
	App, Job string
	Result   *RunResult
	Err      error
}

// Scheduler starts the due runs of every app's jobs (the reconcile
// watcher's part). It keeps in memory when each job last started, read
// from the journal the first time it sees the job, so a tick reads only
// ACTIVE and the serving revision of each app. A job whose run is going
// in this process is not started again; one going in another process is
// skipped by Run (its run lock). Safe for use by one ticking goroutine.
type Scheduler struct {
	mu      sync.Mutex
	last    map[string]time.Time // app/job → last start
	running map[string]bool
	wg      sync.WaitGroup
}

// NewScheduler returns an empty Scheduler.
func NewScheduler() *Scheduler {
	return &Scheduler{last: map[string]time.Time{}, running: map[string]bool{}}
}

// Tick starts, each in its own goroutine, the run of every job of apps
// (none: every app) that is due now, and returns at once. done, if set,
// gets the report of each started run when it ends. An app that cannot
// be read is skipped (a later tick tries again).
func (s *Scheduler) Tick(ctx context.Context, e *Engine, apps []string, done func(Report)) {
	if len(apps) == 0 {
		var err error
		if apps, err = e.Store.ListApps(ctx); err != nil {
			e.Log().Warn("jobs: list apps", "error", err)
			return
		}
	}
	for _, app := range apps {
		s.tickApp(ctx, e, app, done)
	}
}

// tickApp starts app's due jobs.
func (s *Scheduler) tickApp(ctx context.Context, e *Engine, app string, done func(Report)) {
	a, err := e.loadJobs(ctx, app)
	if err != nil || len(a.rev.Spec.Jobs) == 0 {
		return
	}
	now := e.Now()
	for _, j := range a.rev.Spec.Jobs {
		if _, err := a.serving(j); err != nil {
			continue
		}
		sch, err := schedule.Parse(j.Schedule)
		if err != nil {
			continue
		}
		key := app + "/" + j.Name
		last, ok := s.lastStart(ctx, e, app, j.Name, key)
		if !ok {
			continue
		}
		if due, _ := sch.Due(last, a.since(), now); !due || !s.claim(key, now) {
			continue
		}
		s.wg.Go(func() {
			res, err := e.Run(ctx, RunRequest{App: app, Job: j.Name, Trigger: TriggerSchedule})
			s.release(key)
			if done != nil {
				done(Report{App: app, Job: j.Name, Result: res, Err: err})
			}
		})
	}
}

// lastStart is the job's last start as this scheduler knows it, read from
// the journal on first sight (ok=false when the journal cannot be read).
func (s *Scheduler) lastStart(ctx context.Context, e *Engine, app, job, key string) (time.Time, bool) {
	s.mu.Lock()
	t, ok := s.last[key]
	s.mu.Unlock()
	if ok {
		return t, true
	}
	last, err := e.lastRuns(ctx, app)
	if err != nil {
		e.Log().Warn("jobs: read last runs", "app", app, "error", err)
		return time.Time{}, false
	}
	if op, ok := last[job]; ok {
		t = op.StartedAt
	}
	s.mu.Lock()
	s.last[key] = t
	s.mu.Unlock()
	return t, true
}

// claim marks key running and started at now, unless a run of it is
// going in this process.
func (s *Scheduler) claim(key string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[key] {
		return false
	}
	s.running[key], s.last[key] = true, now
	return true
}

func (s *Scheduler) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, key)
}

// Wait waits for every run the scheduler started to end.
func (s *Scheduler) Wait() { s.wg.Wait() }

// Skipped reports whether r is a run skipped because the job's last run
// was still going.
func (r Report) Skipped() bool {
	return r.Result != nil && r.Result.Skipped != "" && errors.Is(r.Err, core.ErrConflict)
}
