package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// rebuildInterrupted is R41.3's rollback of an interrupted replacement:
// the container ACTIVE names for service is gone and the recovery record
// says an interrupted replacement removed it without publishing a
// successor (recordRebuilds, R47). Under the app lock the pass claims a
// `start` op with one step `service.<name>.start` (Before = the gone
// container), rebuilds the generation from ACTIVE's pinned revision and
// digest (R54: sequential flow, candidate journaled before start,
// deploy-time readiness, ACTIVE published), drops the Rebuild entry, then
// verifies and routes the new container (R41.7) and records its execution.
// A single-writer service's requests held by the interrupted replacement
// (R58) stay held until the rebuilt generation is routed.
//
// It returns the verified start time and true on success. A failed rebuild
// is journaled on the op (failed outcome) and returned; the Rebuild entry
// stays, so the next pass tries again.
func (e *Engine) rebuildInterrupted(ctx context.Context, app, name string, as *core.ActiveService, rep *ReconcileReport) (time.Time, bool, error) {
	gone := as.Container
	now := e.Now()
	op := core.Operation{
		ID: e.NextOpID(), Kind: core.OpStart, App: app, StartedAt: now,
		Fingerprint: steps.Fingerprint(core.OpStart, app, "rebuild", name, gone),
		Steps: []core.Step{{ID: steps.ServiceStepID(name, "start"), State: core.StepPending, Service: name, Before: gone,
			StartedAt: now, UpdatedAt: now, Detail: "rebuild of " + gone + ", removed by an interrupted replacement"}},
	}
	stored, claimed, err := e.ClaimOp(ctx, op)
	if err != nil || !claimed {
		return time.Time{}, false, fmt.Errorf("rebuild %s: %w", gone, errors.Join(err, errors.New("operation not claimed")))
	}
	r := e.Run(&oprun.LifecycleRun{E: e.Oprun(), App: app, Op: &stored, Started: time.Now()})
	ss := r.NewSvcStep(0, "rebuild", name, gone, as)
	rb, err := r.RebuildMissing(ctx, name, as, 0)
	ss.Res.Warnings = append(ss.Res.Warnings, rb.Warnings...)
	if err != nil {
		if rb.After != "" {
			r.Op.Steps[0].After = rb.After
		}
		ss.Fail(ctx, err, rb.Diagnostics, false)
		r.Finalize()
		r.Save(ctx)
		return time.Time{}, false, fmt.Errorf("container %s was removed by an interrupted replacement; %w", gone, err)
	}
	ss.Res.Flow = steps.FlowSequential
	ss.Succeed(rb.After, steps.ResultEndpoints(rb), rb.StartedAt)
	r.Finalize()
	r.Save(ctx)
	if err := e.dropRebuild(ctx, app, name); err != nil {
		e.Log().Warn("drop rebuild entry", "app", app, "service", name, "error", err)
	}
	e.recordRecovery(ctx, app, name, gone, "removed by an interrupted replacement", "rebuilt as "+readiness.ShortID(rb.After), rep)
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		return time.Time{}, false, err
	}
	cur := active.Services[name]
	if cur == nil || cur.Container != rb.After {
		return time.Time{}, false, fmt.Errorf("%w: ACTIVE changed during the rebuild of %s", core.ErrConflict, name)
	}
	t, err := e.verifyAndRoute(ctx, app, name, cur, rb.StartedAt, true)
	if err != nil {
		return time.Time{}, false, errors.Join(err, e.Withdraw(ctx, app, name))
	}
	return t, true, nil
}

// dropRebuild deletes service's entry from the recovery record's Rebuild
// set (no entry: nothing written).
func (e *Engine) dropRebuild(ctx context.Context, app, service string) error {
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return err
	}
	if _, ok := rec.Rebuild[service]; !ok {
		return nil
	}
	delete(rec.Rebuild, service)
	return e.Store.SaveRecovery(ctx, app, rec)
}
