package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
)

// convergeLast finalizes the job's last run when it is not terminal
// although no process holds the job (its process died): a run whose
// container exited gets its exit status and output, one whose container
// is gone or never existed fails, one still past its timeout is killed
// and fails. A run whose container still runs within its timeout is
// still going: the result is Skipped (ErrConflict). The caller holds the
// job's run lock.
func (e *Engine) convergeLast(ctx context.Context, a appJobs, j core.JobSpec) (*RunResult, error) {
	app := a.info.Name
	last, err := e.lastRuns(ctx, app)
	if err != nil {
		return nil, err
	}
	op, ok := last[j.Name]
	if !ok || op.Terminal() {
		return nil, nil
	}
	r := &run{e: e, a: a, j: j, op: op, cname: steps.ContainerName(app, "job-"+j.Name, op.ID)}
	if len(r.op.Steps) == 0 {
		r.op.Steps = []core.Step{{ID: stepID(j.Name), State: core.StepPending, Service: j.Service, StartedAt: op.StartedAt}}
	}
	id := Container(op)
	if id == "" {
		r.dropSecretFiles(ctx)
		r.finishAt(ctx, nil, errors.New("the run was interrupted before its container was created"), op.StartedAt)
		return nil, nil
	}
	st, err := e.Runtime.InspectContainer(ctx, id)
	switch {
	case errors.Is(err, core.ErrNotFound):
		r.dropSecretFiles(ctx)
		r.finishAt(ctx, nil, fmt.Errorf("the run was interrupted and its container %s is gone", shortID(id)), op.StartedAt)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("app %s job %s: inspect the last run's container %s: %w", app, j.Name, shortID(id), err)
	case st.Status == core.StatusExited || st.Status == core.StatusDead:
		r.secrets = e.runSecrets(ctx, app, op)
		r.collect(ctx, id)
		r.remove(ctx, id)
		code := st.ExitCode
		r.finishAt(ctx, &code, nil, op.StartedAt)
		return nil, nil
	case e.Now().Sub(op.StartedAt) > Timeout(j):
		r.secrets = e.runSecrets(ctx, app, op)
		r.collect(ctx, id)
		r.remove(ctx, id)
		r.finishAt(ctx, nil, fmt.Errorf("%w: the command did not exit within its timeout %s and was killed; make it faster or raise [jobs.%s] timeout", core.ErrConflict, Timeout(j), j.Name), op.StartedAt)
		return nil, nil
	}
	res := &RunResult{Op: op, Skipped: fmt.Sprintf("the last run (op %s, started %s) is still going in container %s", op.ID, op.StartedAt.UTC().Format(time.RFC3339), shortID(id))}
	return res, fmt.Errorf("%w: job %s of app %s: %s; a job runs one at a time", core.ErrConflict, j.Name, app, res.Skipped)
}

// finishAt is finish for a run that started at the journal's time t
// (its duration measured on the engine's clock).
func (r *run) finishAt(ctx context.Context, code *int, cause error, t time.Time) core.Operation {
	return r.finish(ctx, code, cause, time.Now().Add(-r.e.Now().Sub(t)))
}
