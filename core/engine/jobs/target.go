package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// appJobs is what an app's jobs run against: the revision that declares
// them (ACTIVE's converged revision, else DESIRED), ACTIVE, the intent
// and the app's identity.
type appJobs struct {
	info   core.AppInfo
	rev    core.Revision
	active core.Active
	intent core.Intent
}

// loadJobs reads app's jobs. An unknown app wraps ErrNotFound, an app that
// serves nothing ErrConflict.
func (e *Engine) loadJobs(ctx context.Context, app string) (appJobs, error) {
	var a appJobs
	info, err := e.Store.LoadApp(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		return a, fmt.Errorf("%w: app %q not found (deploy it with: docker gordon deploy -f FILE)", core.ErrNotFound, app)
	}
	if err != nil {
		return a, fmt.Errorf("app %s: %w", app, err)
	}
	a.info = info
	if a.active, err = e.Store.LoadActive(ctx, app); errors.Is(err, core.ErrNotFound) {
		return a, fmt.Errorf("%w: app %s serves nothing yet (deploy it first)", core.ErrConflict, app)
	} else if err != nil {
		return a, fmt.Errorf("app %s: load ACTIVE: %w", app, err)
	}
	id := a.active.ConvergedRevision
	if id == "" {
		if id, err = e.Store.LoadDesired(ctx, app); err != nil {
			return a, fmt.Errorf("app %s: load DESIRED: %w", app, err)
		}
	}
	if a.rev, err = e.Store.LoadRevision(ctx, app, id); err != nil {
		return a, fmt.Errorf("app %s: load revision %s: %w", app, id, err)
	}
	if a.intent, err = e.Store.LoadIntent(ctx, app); err != nil {
		return a, fmt.Errorf("app %s: load intent: %w", app, err)
	}
	return a, nil
}

// job returns the declared job named name (ErrNotFound naming the app's
// jobs when there is none).
func (a appJobs) job(name string) (core.JobSpec, error) {
	if j, ok := find(a.rev.Spec, name); ok {
		return j, nil
	}
	var names []string
	for _, j := range a.rev.Spec.Jobs {
		names = append(names, j.Name)
	}
	if len(names) == 0 {
		return core.JobSpec{}, fmt.Errorf("%w: app %s has no job %q: its revision %s declares no [jobs.NAME]", core.ErrNotFound, a.info.Name, name, a.rev.ID)
	}
	return core.JobSpec{}, fmt.Errorf("%w: app %s has no job %q (its jobs: %s)", core.ErrNotFound, a.info.Name, name, strings.Join(names, ", "))
}

// serving returns the ACTIVE record of j's service, or why the job cannot
// run now (ErrConflict): the app is stopped, or the service serves
// nothing.
func (a appJobs) serving(j core.JobSpec) (*core.ActiveService, error) {
	app := a.info.Name
	if a.intent.Stopped {
		return nil, fmt.Errorf("%w: job %s of app %s does not run while the app is stopped; start it with: docker gordon start %s", core.ErrConflict, j.Name, app, app)
	}
	as := a.active.Services[j.Service]
	if as == nil || as.Container == "" {
		return nil, fmt.Errorf("%w: job %s of app %s runs as service %s, which serves nothing now (deploy or start the app)", core.ErrConflict, j.Name, app, j.Service)
	}
	return as, nil
}

// since is when a job that never ran was first due from: the creation of
// the revision that declares it.
func (a appJobs) since() time.Time { return a.rev.CreatedAt }

// lastRuns returns, per job name, the newest job op of app (by start).
func (e *Engine) lastRuns(ctx context.Context, app string) (map[string]core.Operation, error) {
	ops, err := e.Store.ListOps(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("app %s: list operations: %w", app, err)
	}
	out := map[string]core.Operation{}
	for _, op := range ops {
		name := NameOf(op)
		if name == "" {
			continue
		}
		if cur, ok := out[name]; !ok || !op.StartedAt.Before(cur.StartedAt) {
			out[name] = op
		}
	}
	return out, nil
}
