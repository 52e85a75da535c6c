package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
)

// LabelJob labels a job run's container with the job's name; its
// LabelRole is RoleJob, so no workload rule (orphan removal, engine-event
// wakes, ownership checks) ever counts it.
const (
	LabelJob = core.LabelPrefix + "job"
	RoleJob  = "job"
)

// pollExit is how often a run's container is inspected for its exit.
const pollExit = 200 * time.Millisecond

// cleanupBound bounds the journal writes and container removal after a
// run was cancelled.
const cleanupBound = 30 * time.Second

// RunRequest is one run of a job.
type RunRequest struct {
	App string
	Job string
	// Trigger is TriggerSchedule or TriggerManual ("": manual).
	Trigger string
	// Output, if set, gets each line the command writes as it writes it
	// (secret values redacted).
	Output func(core.LogLine)
}

// RunResult is a run's journaled op, or the op of the run still going
// when Skipped is set (nothing ran).
type RunResult struct {
	Op core.Operation `json:"op"`
	// Skipped says why nothing ran: the job's last run is still going.
	Skipped string `json:"skipped,omitempty"`
}

// Run runs job req.Job of req.App now, once, and waits for it: a new
// container of the job's service's serving generation (image, env,
// secrets, mounts, networks; no alias, no port) runs the job's command,
// bounded by its timeout. The run is journaled as an op of kind job
// (pending while it runs, its container recorded as soon as it exists),
// then its exit status and the last OutputMax bytes of its output
// with the outcome: success on exit 0, failed otherwise (see Kind). The container is
// removed either way.
//
// Overlap: only one run of a job goes at a time (RunLocker). While
// another run holds the job, or the container of a run whose process died
// still runs, nothing runs: the result is Skipped, with that run's op, and
// the error wraps core.ErrConflict. A run whose process died is finalized
// first (its exit status, or failed when it never exited).
//
// Errors: an unknown app or job wraps ErrNotFound; a stopped app or a
// service that serves nothing ErrConflict (nothing is journaled). A run
// that ran but failed is returned with a nil error: its op says why.
func (e *Engine) Run(ctx context.Context, req RunRequest) (*RunResult, error) {
	a, err := e.loadJobs(ctx, req.App)
	if err != nil {
		return nil, err
	}
	j, err := a.job(req.Job)
	if err != nil {
		return nil, err
	}
	as, err := a.serving(j)
	if err != nil {
		return nil, err
	}
	locker, ok := e.Store.(RunLocker)
	if !ok {
		return nil, fmt.Errorf("%w: the state store cannot hold a job's run lock, so jobs cannot run", core.ErrUnavailable)
	}
	holder := e.Holder
	holder.Verb = "job " + j.Name
	lock, ok, err := locker.TryLockJob(ctx, req.App, j.Name, holder)
	if err != nil {
		return nil, fmt.Errorf("app %s job %s: %w", req.App, j.Name, err)
	}
	if !ok {
		return e.skipRunning(ctx, req.App, j.Name)
	}
	defer lock.Unlock()
	if res, err := e.convergeLast(ctx, a, j); res != nil || err != nil {
		return res, err
	}
	trigger := req.Trigger
	if trigger == "" {
		trigger = TriggerManual
	}
	r := &run{e: e, a: a, j: j, as: as, output: req.Output, trigger: trigger}
	op := r.execute(ctx)
	e.prune(req.App)
	return &RunResult{Op: op}, nil
}

// skipRunning is the result of a run refused because another run of the
// job holds it.
func (e *Engine) skipRunning(ctx context.Context, app, job string) (*RunResult, error) {
	res := &RunResult{Skipped: "the last run is still going"}
	last, err := e.lastRuns(ctx, app)
	if err == nil {
		if op, ok := last[job]; ok && !op.Terminal() {
			res.Op = op
			res.Skipped = fmt.Sprintf("the last run (op %s, started %s) is still going", op.ID, op.StartedAt.UTC().Format(time.RFC3339))
		}
	}
	return res, fmt.Errorf("%w: job %s of app %s: %s; a job runs one at a time (see docker gordon logs %s --job %s)", core.ErrConflict, job, app, res.Skipped, app, job)
}

// run is one run of a job being executed.
type run struct {
	e       *Engine
	a       appJobs
	j       core.JobSpec
	as      *core.ActiveService
	op      core.Operation
	cname   string
	secrets []string
	output  func(core.LogLine)
	trigger string
}

// execute journals the run, creates and starts its container, waits for
// its exit within the job's timeout, records the exit status and output,
// removes the container and returns the final op.
func (r *run) execute(ctx context.Context) core.Operation {
	e, app, j := r.e, r.a.info.Name, r.j
	now := e.Now()
	r.op = core.Operation{ID: e.NextOpID(), Kind: Kind, App: app, Revision: r.as.EffectiveRevision, StartedAt: now,
		Steps: []core.Step{{ID: stepID(j.Name), State: core.StepPending, Service: j.Service, Image: r.as.Image, Digest: r.as.Digest,
			Detail: fmt.Sprintf("%s: running (%s)", argv(j.Command), r.triggerText()), StartedAt: now, UpdatedAt: now}}}
	r.cname = steps.ContainerName(app, "job-"+j.Name, r.op.ID)
	if err := e.Store.SaveOp(ctx, r.op); err != nil {
		e.Log().Error("journal job run", "app", app, "job", j.Name, "error", err)
	}
	started := time.Now()
	id, err := r.create(ctx)
	if err != nil {
		return r.finish(ctx, nil, fmt.Errorf("create the run's container: %w", err), started)
	}
	st, err := r.wait(ctx, id)
	r.collect(ctx, id)
	r.remove(ctx, id)
	if err != nil {
		return r.finish(ctx, nil, err, started)
	}
	code := st.ExitCode
	return r.finish(ctx, &code, nil, started)
}

// create creates and starts the run's container (its ID journaled before
// it starts).
func (r *run) create(ctx context.Context) (string, error) {
	e, app, j := r.e, r.a.info.Name, r.j
	rev := r.a.rev
	if r.as.EffectiveRevision != "" && r.as.EffectiveRevision != rev.ID {
		var err error
		if rev, err = e.Store.LoadRevision(ctx, app, r.as.EffectiveRevision); err != nil {
			return "", fmt.Errorf("load revision %s: %w", r.as.EffectiveRevision, err)
		}
	}
	cs, err := r.containerSpec(ctx, rev)
	if err != nil {
		r.dropSecretFiles(ctx)
		return "", err
	}
	id, err := e.Runtime.CreateContainer(ctx, cs)
	if err != nil {
		r.dropSecretFiles(ctx)
		return "", err
	}
	r.op.Steps[0].After = id
	if err := e.Store.SaveOp(ctx, r.op); err != nil {
		e.Log().Error("journal job run", "app", app, "job", j.Name, "error", err)
	}
	if err := e.Runtime.StartContainer(ctx, id); err != nil {
		r.remove(ctx, id)
		return "", fmt.Errorf("start %s: %w", shortID(id), err)
	}
	return id, nil
}

// wait follows the container's output to r.output (when set) and waits
// for it to exit, within the job's timeout. A timeout or a cancelled ctx
// is an error (the container is removed by the caller).
func (r *run) wait(ctx context.Context, id string) (core.ContainerState, error) {
	timeout := Timeout(r.j)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if r.output != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		lctx, stop := context.WithCancel(wctx)
		defer stop()
		go func() {
			defer close(done)
			_ = r.e.Runtime.Logs(lctx, id, core.LogOptions{Follow: true}, func(l core.LogLine) error {
				l.Text = steps.DpRedact(l.Text, r.secrets)
				r.output(l)
				return nil
			})
		}()
	}
	t := time.NewTicker(pollExit)
	defer t.Stop()
	for {
		st, err := r.e.Runtime.InspectContainer(wctx, id)
		if err == nil && (st.Status == core.StatusExited || st.Status == core.StatusDead) {
			if r.output != nil {
				// Let the follow stream deliver the last lines before
				// it is cancelled.
				r.drain(wctx)
			}
			return st, nil
		}
		if errors.Is(err, core.ErrNotFound) && wctx.Err() == nil {
			return st, fmt.Errorf("%w: the run's container %s was removed while it ran (by docker gordon remove, or by hand): the run did not finish", core.ErrConflict, shortID(id))
		}
		if err != nil && wctx.Err() == nil {
			return st, fmt.Errorf("inspect %s: %w", shortID(id), err)
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return st, fmt.Errorf("the run was cancelled (%v); its container %s was removed", context.Cause(ctx), shortID(id))
			}
			return st, fmt.Errorf("%w: the command did not exit within its timeout %s and was killed; make it faster or raise [jobs.%s] timeout", core.ErrConflict, timeout, r.j.Name)
		case <-t.C:
		}
	}
}

// drain gives the output stream a moment to end by itself after the
// container exited (the engine closes a follow stream at exit).
func (r *run) drain(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(pollExit):
	}
}

// collect reads the container's whole output and keeps its last
// OutputMax bytes on the op's step, secret values redacted.
func (r *run) collect(ctx context.Context, id string) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupBound)
	defer cancel()
	var tail outputTail
	err := r.e.Runtime.Logs(lctx, id, core.LogOptions{}, func(l core.LogLine) error {
		tail.add(steps.DpRedact(l.Text, r.secrets))
		return nil
	})
	if err != nil {
		r.op.Warnings = append(r.op.Warnings, core.Warning{Service: r.j.Service, Detail: "the run's output could not be read: " + err.Error()})
	}
	r.op.Steps[0].Diagnostics = tail.lines()
}

// remove force-removes the run's container and its secret files; a
// failure is a warning on the op.
func (r *run) remove(ctx context.Context, id string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupBound)
	defer cancel()
	if err := r.e.Runtime.RemoveContainer(cctx, id, true); err != nil && !errors.Is(err, core.ErrNotFound) {
		r.op.Warnings = append(r.op.Warnings, core.Warning{Service: r.j.Service, Leftover: id, Detail: "the run's container could not be removed: " + err.Error()})
	}
	r.dropSecretFiles(cctx)
}

// dropSecretFiles deletes the per-container secret copies of the run.
func (r *run) dropSecretFiles(ctx context.Context) {
	if err := r.e.Store.DeleteContainerSecrets(context.WithoutCancel(ctx), r.a.info.Name, r.cname); err != nil {
		r.op.Warnings = append(r.op.Warnings, core.Warning{Service: r.j.Service, Leftover: r.cname, Detail: "the run's secret files could not be deleted: " + err.Error()})
	}
}

// finish records the run's end on its step and op (outcome success on
// exit 0, else failed) and saves it.
func (r *run) finish(ctx context.Context, code *int, cause error, started time.Time) core.Operation {
	e := r.e
	took := time.Since(started).Round(time.Millisecond)
	st := &r.op.Steps[0]
	st.UpdatedAt = e.Now()
	st.Phases = map[string]core.Duration{"run": core.Duration(took)}
	if code != nil {
		st.Result = fmt.Sprintf("exit %d", *code)
	}
	switch {
	case cause != nil:
		st.State, st.Error = core.StepFailed, cause.Error()
		st.Detail = fmt.Sprintf("%s: failed after %s (%s)", argv(r.j.Command), took, r.triggerText())
		r.op.Outcome = core.OutcomeFailed
	case *code != 0:
		st.State, st.Error = core.StepFailed, fmt.Sprintf("the command exited with status %d", *code)
		st.Detail = fmt.Sprintf("%s: exit %d after %s (%s)", argv(r.j.Command), *code, took, r.triggerText())
		r.op.Outcome = core.OutcomeFailed
	default:
		st.State = core.StepSucceeded
		st.Detail = fmt.Sprintf("%s: exit 0 after %s (%s)", argv(r.j.Command), took, r.triggerText())
		r.op.Outcome = core.OutcomeSuccess
	}
	r.op.FinishedAt = e.Now()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupBound)
	defer cancel()
	if err := e.Store.SaveOp(sctx, r.op); err != nil {
		e.Log().Error("journal job run", "app", r.op.App, "job", r.j.Name, "op", r.op.ID, "error", err)
	}
	return r.op
}

// prune applies the retention (job runs have their own bound, see
// retention.Select) when the app lock is free now; a busy lock leaves it
// to the next operation.
func (e *Engine) prune(app string) {
	if e.Retention.Ops <= 0 && e.Retention.Revisions <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupBound)
	defer cancel()
	lk, ok, err := e.Store.TryLock(ctx, app, core.LockHolder{PID: e.Holder.PID, Verb: "prune", Host: e.Holder.Host})
	if err != nil || !ok {
		return
	}
	defer lk.Unlock()
	if _, _, err := e.Store.Prune(ctx, app, e.Retention.Ops, e.Retention.Revisions); err != nil {
		e.Log().Warn("retention: old ops and revisions not pruned; they are kept", "app", app, "error", err)
	}
}

// triggerText says what started the run, for the step's Detail.
func (r *run) triggerText() string {
	switch r.trigger {
	case TriggerSchedule:
		return "run by the schedule"
	case TriggerManual:
		return "run by jobs run"
	}
	return "run before its process ended"
}

// hostname is a run's hostname, "job-<name>" within a DNS label's 63.
func hostname(job string) string {
	h := "job-" + job
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-")
	}
	return h
}

// argv is a command for messages.
func argv(cmd []string) string { return strings.Join(cmd, " ") }

// shortID is the first 12 characters of a container ID.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
