package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Boot actions reported per app.
const (
	BootReconciled = "reconciled" // no services: interrupted-op reconciliation only
	BootStopped    = "stopped"    // stopped app: reconciled, then stop-converged (R42)
	BootStarted    = "started"    // running app: Start without key
	BootSkipped    = "skipped"    // the app could not be handled (see Error)
)

// BootReport is what Boot did for one app.
type BootReport struct {
	App string `json:"app"`
	// Action is reconciled, stopped, started or skipped.
	Action string `json:"action"`
	// Start is the start op's result (Action started).
	Start *oprun.OpResult `json:"start,omitempty"`
	// Error is the app's failure ("" when none).
	Error string `json:"error,omitempty"`
}

// Boot is SPEC R57, run after the host or the Docker engine restarted:
// store self-recovery; list apps; per app under its lock (a failing app
// never blocks the next; errors are aggregated with errors.Join, each
// naming its app): load intent and ACTIVE; no services → reconcile the
// interrupted op only; stopped → reconcile, then stop-converge each service
// (R42: a revived container is stopped with its grace, never removed) and
// rebuild traffic; else Start without key (which reconciles first, so
// exactly once), any failed service being an app error. Boot never retires
// pending predecessors and never routes an unverified persisted port.
func (e *Engine) Boot(ctx context.Context) ([]BootReport, error) {
	if err := e.Store.Recover(ctx); err != nil {
		return nil, fmt.Errorf("boot: store self-recovery: %w", err)
	}
	apps, err := e.Store.ListApps(ctx)
	if err != nil {
		return nil, fmt.Errorf("boot: list apps: %w", err)
	}
	var reports []BootReport
	var errs []error
	for _, app := range apps {
		rep, err := e.bootApp(ctx, app)
		if err != nil {
			rep.Error = err.Error()
			errs = append(errs, fmt.Errorf("app %s: %w", app, err))
		}
		reports = append(reports, rep)
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
	}
	return reports, errors.Join(errs...)
}

// bootApp is R57 for one app.
func (e *Engine) bootApp(ctx context.Context, app string) (BootReport, error) {
	rep := BootReport{App: app, Action: BootSkipped}
	if _, err := e.Store.LoadApp(ctx, app); errors.Is(err, core.ErrNotFound) {
		return rep, nil // removed: nothing to boot
	}
	lk, err := e.Lock(ctx, app, "boot", "")
	if err != nil {
		return rep, err
	}
	defer lk.Unlock()
	intent, err := e.Store.LoadIntent(ctx, app)
	if err != nil {
		return rep, fmt.Errorf("load intent: %w", err)
	}
	active, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		active, err = core.Active{App: app}, nil
	}
	if err != nil {
		return rep, fmt.Errorf("load ACTIVE: %w", err)
	}
	if len(active.Services) == 0 {
		if err := e.ReconcileInterrupted(ctx, app, e.LiveOp(app)); err != nil {
			return rep, err
		}
		rep.Action = BootReconciled
		return rep, nil
	}
	if intent.Stopped {
		if err := e.ReconcileInterrupted(ctx, app, e.LiveOp(app)); err != nil {
			return rep, err
		}
		rep.Action = BootStopped
		var errs []error
		for _, name := range steps.ActiveServiceNames(active) {
			if err := e.stopConverge(ctx, app, name, active.Services[name]); err != nil {
				errs = append(errs, err)
			}
		}
		if err := e.Rebuild(ctx); err != nil {
			errs = append(errs, err)
		}
		return rep, errors.Join(errs...)
	}
	rep.Action = BootStarted
	res, err := e.StartLocked(ctx, lk.Checks, oprun.LifecycleRequest{App: app})
	rep.Start = res
	if err != nil {
		return rep, err
	}
	r := &oprun.LifecycleRun{E: e.Oprun(), App: app, Results: res.Services}
	if ferr := r.FailedErr(core.OpStart); ferr != nil {
		return rep, ferr
	}
	return rep, nil
}
