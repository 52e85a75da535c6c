package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Restart restarts services (SPEC R49, R53). It needs ACTIVE (else
// ErrConflict "never deployed"); each req.Services entry must be in ACTIVE
// (else ErrNotFound naming the app's services, as logs); empty means every
// ACTIVE service. It claims an op without steps, then per selected service
// (name order, step `service.<name>.restart`): no container → fail;
// re-resolve binds; a blocking marker → withdraw, fail. An overlap-eligible
// service (R16 canOverlap of its spec with itself) is replaced by an
// overlap of the same spec (restartOverlap): it keeps answering. Any other
// service restarts in place: withdraw (must succeed; a single-writer
// service is held, R58, until it is routed again or the step fails);
// restart the exact container with its own stop grace. A
// container that is not found is rebuilt (R54) from the revision and digest
// ACTIVE pins; a failed rebuild fails the step with its diagnostics and
// clears the missing container's marker. After an in-place restart: observe
// the start time, re-read binds (claims registered), run the DEPLOY-time
// probe (R29), then persist the binds into ACTIVE; any failure drops the
// binds and fails. Then: outcome, save (a save failure is returned), one
// traffic rebuild (rejection → R11 `traffic.publish`, error), record
// verified executions, and an ErrConflict error naming the failed services
// if any. In place, never a second container for an existing one; the pinned digest
// never changes. Other errors: empty app → ErrInvalid; unknown app →
// ErrNotFound; lock/R7/R8 refusals → ErrConflict. The result is non-nil
// whenever an op was claimed or replayed.
func (e *Engine) Restart(ctx context.Context, req oprun.LifecycleRequest) (*oprun.OpResult, error) {
	if err := e.RequireLiveTraffic(ctx, core.OpRestart); err != nil {
		return nil, err
	}
	fp := steps.Fingerprint(core.OpRestart, req.App, steps.SortedJoin(req.Services))
	lk, res, ok, err := e.LifecyclePreamble(ctx, core.OpRestart, req, fp)
	if !ok {
		return res, err
	}
	defer lk.Unlock()
	active, err := e.activeOrNeverDeployed(ctx, core.OpRestart, req.App)
	if err != nil {
		return nil, err
	}
	selected := req.Services
	if len(selected) == 0 {
		selected = steps.ActiveServiceNames(active)
	}
	for _, s := range selected {
		if as := active.Services[s]; as == nil {
			return nil, fmt.Errorf("%w: restart %s: app %s has no service %q (its services: %s)", core.ErrNotFound, req.App, req.App, s, strings.Join(steps.ActiveServiceNames(active), ", "))
		}
	}
	selected = steps.InOrder(steps.ActiveServiceNames(active), selected)
	r, replay, err := e.ClaimLifecycle(ctx, core.OpRestart, req, fp, nil)
	if r == nil {
		return replay, err
	}
	r.Checks = lk.Checks
	return e.Run(r).restart(ctx, selected)
}

// restart is R53 after the claim.
func (r *LifecycleRun) restart(ctx context.Context, selected []string) (*oprun.OpResult, error) {
	e, app := r.E, r.App
	for _, name := range selected {
		active, err := e.Store.LoadActive(ctx, app)
		if err != nil {
			err = fmt.Errorf("restart %s: load ACTIVE: %w", app, err)
			r.Fail(ctx, steps.StepError, err)
			return r.Result(), err
		}
		r.restartService(ctx, name, active.Services[name])
	}
	r.Finalize()
	if err := r.SaveStrict(ctx); err != nil {
		// The restarts happened but are not journaled: routes still follow
		// ACTIVE, and the verb fails (reconcile records the rest).
		if rerr := e.Rebuild(ctx); rerr != nil {
			err = errors.Join(err, rerr)
		}
		res := r.Result()
		res.Outcome = core.OutcomeFailed
		return res, fmt.Errorf("restart %s: the journal could not be saved: %w", app, err)
	}
	if err := e.Rebuild(ctx); err != nil {
		err = fmt.Errorf("restart %s: %w", app, err)
		r.Fail(ctx, steps.StepTrafficPublish, err)
		return r.Result(), err
	}
	r.RecordExecutions(ctx)
	return r.Result(), r.FailedErr(core.OpRestart)
}

// restartService is R53's per-service part.
func (r *LifecycleRun) restartService(ctx context.Context, name string, as *core.ActiveService) {
	e, app := r.E, r.App
	id := ""
	if as != nil {
		id = as.Container
	}
	i := r.StepAt(steps.ServiceStepID(name, "restart"), name, id)
	r.Save(ctx)
	ss := r.NewSvcStep(i, "restart", name, id, as)
	fail := func(err error, diags []string, dropBinds bool) { ss.Fail(ctx, err, diags, dropBinds) }
	succeed := ss.Succeed
	if id == "" {
		fail(errors.New("no container recorded in ACTIVE"), nil, false)
		return
	}
	if _, err := e.ResolveBinds(r.Checks, r.App, &as.Spec); err != nil {
		fail(err, nil, false)
		return
	}
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		fail(fmt.Errorf("load markers: %w", err), nil, false)
		return
	}
	if m, ok := oprun.BlockingMarker(markers, id); ok {
		werr := e.Withdraw(ctx, app, name)
		fail(errors.Join(fmt.Errorf("recovery inhibited for container %s (%s marker by op %s)", id, m.Reason, m.Operation), werr), nil, false)
		return
	}
	if core.CanOverlap(&as.Spec, &as.Spec) {
		r.restartOverlapStep(ctx, ss, as)
		return
	}
	// In place. A single-writer service is held meanwhile (R58): its hosts
	// and TCP ports keep their routes and hold their traffic until the
	// restarted container is routed (persistBinds ends the hold) or, on
	// failure, endHold.
	var hold time.Time
	if as.Spec.SingleWriter() {
		hold = e.Now().Add(steps.HoldBound(&as.Spec, steps.EffectiveGrace(as.Spec.StopGrace)))
		defer func() {
			if ss.Res.Result == steps.ResultFailed {
				e.EndHold(context.WithoutCancel(ctx), app, name)
			}
		}()
	}
	if err := e.WithdrawHold(ctx, app, name, hold); err != nil {
		fail(fmt.Errorf("withdraw: %w", err), nil, false)
		return
	}
	r.Emit(name, steps.PhaseRestart, id, false)
	err = r.restartInPlace(ctx, name, id, as)
	if errors.Is(err, core.ErrNotFound) {
		rb, rerr := r.RebuildMissing(ctx, name, as, i)
		ss.Res.Warnings = append(ss.Res.Warnings, rb.Warnings...)
		if rerr != nil {
			if rb.After != "" {
				r.Op.Steps[i].After = rb.After
			}
			// R27/R53: the missing container's marker is cleared.
			if cerr := e.Store.ClearMarker(ctx, app, name, id); cerr != nil {
				ss.Res.Warnings = append(ss.Res.Warnings, core.Warning{Service: name, Leftover: id, Detail: "clear recovery inhibition: " + cerr.Error()})
			}
			fail(rerr, rb.Diagnostics, true)
			return
		}
		ss.Res.Flow = steps.FlowSequential
		succeed(rb.After, steps.ResultEndpoints(rb), rb.StartedAt)
		return
	}
	if err != nil {
		fail(fmt.Errorf("restart container %s: %w", id, err), nil, true)
		return
	}
	st, err := e.Runtime.InspectContainer(ctx, id)
	if err != nil {
		fail(fmt.Errorf("inspect %s after restart: %w", id, err), nil, true)
		return
	}
	ep, err := e.ReadBinds(ctx, app, id, &as.Spec)
	if err != nil {
		fail(err, nil, true)
		return
	}
	if err := e.ProbeRunning(ctx, app, name, &as.Spec, readiness.DeployReadinessFor(&as.Spec, st.HasHealthcheck), id, st.StartedAt, ep); err != nil {
		// The values only redact the log tail; the probe failure is the
		// step's error, so an unreadable secret is logged, not reported.
		_, secrets, serr := e.SecretEnv(ctx, r.Checks, app, &as.Spec)
		if serr != nil {
			e.Log().Warn("load secrets to redact diagnostics", "app", app, "service", name, "error", serr)
		}
		fail(err, e.LogTail(ctx, id, secrets), true)
		return
	}
	if err := e.persistBinds(ctx, app, name, id, ep); err != nil {
		fail(err, nil, true)
		return
	}
	succeed(id, ep, st.StartedAt)
}

// restartOverlapStep runs restartOverlap on step ss and journals its end.
func (r *LifecycleRun) restartOverlapStep(ctx context.Context, ss *oprun.SvcStep, as *core.ActiveService) {
	r.Emit(ss.Name, steps.PhaseRestart, ss.Id, false)
	res, err := r.RestartOverlap(ctx, ss.Name, as, ss.I)
	ss.Res.Warnings = append(ss.Res.Warnings, res.Warnings...)
	ss.Res.Flow = steps.FlowOverlap
	if err != nil {
		if res.After != "" {
			r.Op.Steps[ss.I].After = res.After
		}
		ss.Fail(ctx, err, res.Diagnostics, false)
		return
	}
	ss.Succeed(res.After, steps.ResultEndpoints(res), res.StartedAt)
}
