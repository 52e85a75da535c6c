package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
func (e *Engine) Restart(ctx context.Context, req LifecycleRequest) (*OpResult, error) {
	if err := e.RequireLiveTraffic(ctx, core.OpRestart); err != nil {
		return nil, err
	}
	fp := Fingerprint(core.OpRestart, req.App, sortedJoin(req.Services))
	lk, res, ok, err := e.lifecyclePreamble(ctx, core.OpRestart, req, fp)
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
		selected = activeServiceNames(active)
	}
	for _, s := range selected {
		if as := active.Services[s]; as == nil {
			return nil, fmt.Errorf("%w: restart %s: app %s has no service %q (its services: %s)", core.ErrNotFound, req.App, req.App, s, strings.Join(activeServiceNames(active), ", "))
		}
	}
	selected = inOrder(activeServiceNames(active), selected)
	r, replay, err := e.claimLifecycle(ctx, core.OpRestart, req, fp, nil)
	if r == nil {
		return replay, err
	}
	return r.restart(ctx, selected)
}

// restart is R53 after the claim.
func (r *lifecycleRun) restart(ctx context.Context, selected []string) (*OpResult, error) {
	e, app := r.e, r.app
	for _, name := range selected {
		active, err := e.Store.LoadActive(ctx, app)
		if err != nil {
			err = fmt.Errorf("restart %s: load ACTIVE: %w", app, err)
			r.fail(ctx, StepError, err)
			return r.result(), err
		}
		r.restartService(ctx, name, active.Services[name])
	}
	r.finalize()
	if err := r.saveStrict(ctx); err != nil {
		// The restarts happened but are not journaled: routes still follow
		// ACTIVE, and the verb fails (reconcile records the rest).
		if rerr := e.rebuild(ctx); rerr != nil {
			err = errors.Join(err, rerr)
		}
		res := r.result()
		res.Outcome = core.OutcomeFailed
		return res, fmt.Errorf("restart %s: the journal could not be saved: %w", app, err)
	}
	if err := e.rebuild(ctx); err != nil {
		err = fmt.Errorf("restart %s: %w", app, err)
		r.fail(ctx, StepTrafficPublish, err)
		return r.result(), err
	}
	r.recordExecutions(ctx)
	return r.result(), r.failedErr(core.OpRestart)
}

// restartService is R53's per-service part.
func (r *lifecycleRun) restartService(ctx context.Context, name string, as *core.ActiveService) {
	e, app := r.e, r.app
	id := ""
	if as != nil {
		id = as.Container
	}
	i := r.stepAt(ServiceStepID(name, "restart"), name, id)
	r.save(ctx)
	ss := r.newSvcStep(i, "restart", name, id, as)
	fail := func(err error, diags []string, dropBinds bool) { ss.fail(ctx, err, diags, dropBinds) }
	succeed := ss.succeed
	if id == "" {
		fail(errors.New("no container recorded in ACTIVE"), nil, false)
		return
	}
	if _, err := e.resolveBinds(r.app, &as.Spec); err != nil {
		fail(err, nil, false)
		return
	}
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		fail(fmt.Errorf("load markers: %w", err), nil, false)
		return
	}
	if m, ok := blockingMarker(markers, id); ok {
		werr := e.withdraw(ctx, app, name)
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
		hold = e.now().Add(holdBound(&as.Spec, EffectiveGrace(as.Spec.StopGrace)))
		defer func() {
			if ss.res.Result == ResultFailed {
				e.endHold(context.WithoutCancel(ctx), app, name)
			}
		}()
	}
	if err := e.withdrawHold(ctx, app, name, hold); err != nil {
		fail(fmt.Errorf("withdraw: %w", err), nil, false)
		return
	}
	r.progress(name, PhaseRestart, id, false)
	err = e.Runtime.RestartContainer(ctx, id, EffectiveGrace(as.Spec.StopGrace))
	if errors.Is(err, core.ErrNotFound) {
		rb, rerr := r.rebuildMissing(ctx, name, as, i)
		ss.res.Warnings = append(ss.res.Warnings, rb.Warnings...)
		if rerr != nil {
			if rb.After != "" {
				r.op.Steps[i].After = rb.After
			}
			// R27/R53: the missing container's marker is cleared.
			if cerr := e.Store.ClearMarker(ctx, app, name, id); cerr != nil {
				ss.res.Warnings = append(ss.res.Warnings, core.Warning{Service: name, Leftover: id, Detail: "clear recovery inhibition: " + cerr.Error()})
			}
			fail(rerr, rb.Diagnostics, true)
			return
		}
		ss.res.Flow = FlowSequential
		succeed(rb.After, resultEndpoints(rb), rb.StartedAt)
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
	ep, err := e.readBinds(ctx, app, id, &as.Spec)
	if err != nil {
		fail(err, nil, true)
		return
	}
	if err := e.probeRunning(ctx, app, name, &as.Spec, DeployReadinessFor(&as.Spec, st.HasHealthcheck), id, st.StartedAt, ep); err != nil {
		// The values only redact the log tail; the probe failure is the
		// step's error, so an unreadable secret is logged, not reported.
		_, secrets, serr := e.secretEnv(ctx, app, &as.Spec)
		if serr != nil {
			e.log().Warn("load secrets to redact diagnostics", "app", app, "service", name, "error", serr)
		}
		fail(err, e.logTail(ctx, id, secrets), true)
		return
	}
	if err := e.persistBinds(ctx, app, name, id, ep); err != nil {
		fail(err, nil, true)
		return
	}
	succeed(id, ep, st.StartedAt)
}

// restartOverlapStep runs restartOverlap on step ss and journals its end.
func (r *lifecycleRun) restartOverlapStep(ctx context.Context, ss *svcStep, as *core.ActiveService) {
	r.progress(ss.name, PhaseRestart, ss.id, false)
	res, err := r.restartOverlap(ctx, ss.name, as, ss.i)
	ss.res.Warnings = append(ss.res.Warnings, res.Warnings...)
	ss.res.Flow = FlowOverlap
	if err != nil {
		if res.After != "" {
			r.op.Steps[ss.i].After = res.After
		}
		ss.fail(ctx, err, res.Diagnostics, false)
		return
	}
	ss.succeed(res.After, resultEndpoints(res), res.StartedAt)
}
