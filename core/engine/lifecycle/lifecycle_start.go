package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/deploy"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Start starts an app (SPEC R49, R51, R52): under the app lock, after store
// self-recovery and interrupted-op reconciliation, it claims an op with
// `intent.running` pending and persists stopped=false. Then per ACTIVE
// service (name order, step `service.<name>.start` journaled before any
// runtime work): re-resolve binds; a blocking marker on the container
// fails the step ("recovery inhibited for container <id>"); a running
// container is verified (R52); a stopped one is started by its exact ID and
// verified; a missing one (or one that will not start) is rebuilt from the
// revision and digest pinned in ACTIVE (R54). A failed service has its
// binds dropped from ACTIVE (withdraw-state), so it is never routed. After
// the loop: outcome, save, one traffic rebuild (rejection → R11
// `traffic.publish`, error), then the verified executions of all results
// are recorded (R37). Never activates a pending DESIRED revision.
//
// Start returns NO error for failed services [C]: the outcome (partial or
// failed) says so and Boot turns it into an app error (R57). Errors: empty
// app or a service selection → ErrInvalid; unknown app → ErrNotFound;
// never deployed → ErrConflict; lock/R7/R8 refusals → ErrConflict.
func (e *Engine) Start(ctx context.Context, req oprun.LifecycleRequest) (*oprun.OpResult, error) {
	if err := e.RequireLiveTraffic(ctx, core.OpStart); err != nil {
		return nil, err
	}
	if err := oprun.RefuseServices(core.OpStart, req); err != nil {
		return nil, err
	}
	fp := steps.Fingerprint(core.OpStart, req.App)
	lk, res, ok, err := e.LifecyclePreamble(ctx, core.OpStart, req, fp)
	if !ok {
		return res, err
	}
	res, err = e.StartLocked(ctx, lk.Checks, req)
	lk.Unlock()
	if err != nil || res == nil || res.Replayed || res.Outcome != core.OutcomeSuccess {
		return res, err
	}
	e.restoreInstances(ctx, req.App, res)
	return res, nil
}

// restoreInstances brings a started app's replicated services back to
// their declared count: stop retires the replicas, start brings back each
// service's recorded container, so a service declaring n instances then
// runs fewer. When every service serves the revision DESIRED names, that
// revision is deployed again (journaled as a scale): the services short of
// instances get the missing ones beside the serving one (created, probed,
// then routed), the others are unchanged. With a pending DESIRED revision
// nothing is deployed (start never activates one); a warning on res names
// the services short of instances and how to restore them, as does a
// failed deploy.
func (e *Engine) restoreInstances(ctx context.Context, app string, res *oprun.OpResult) {
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		return
	}
	var short []string
	eff := map[string]bool{}
	for _, name := range steps.ActiveServiceNames(active) {
		as := active.Services[name]
		if as == nil || as.Container == "" {
			continue
		}
		eff[as.EffectiveRevision] = true
		if have, want := len(as.Instances()), as.Spec.Instances(); have < want {
			short = append(short, fmt.Sprintf("%s (%d of %d)", name, have, want))
		}
	}
	if len(short) == 0 {
		return
	}
	desired, derr := e.Store.LoadDesired(ctx, app)
	warn := func(detail string) {
		res.Warnings = append(res.Warnings, core.Warning{Detail: detail})
	}
	if derr != nil || len(eff) != 1 || !eff[desired] {
		warn(fmt.Sprintf("fewer instances than declared: %s; restore them with: docker gordon scale %s SERVICE=N", strings.Join(short, ", "), app))
		return
	}
	e.Emit(steps.ProgressEvent{App: app, Phase: steps.PhaseResolve, Detail: "restore instances: " + strings.Join(short, ", ")})
	dr, err := e.Deploy(ctx, deploy.DeployRequest{App: app, Revision: desired, Verb: core.VerbScale})
	if err != nil || dr == nil || dr.Outcome != core.OutcomeSuccess {
		detail := "the deploy did not succeed"
		if err != nil {
			detail = err.Error()
		}
		warn(fmt.Sprintf("fewer instances than declared: %s; restoring them failed (%s); retry with: docker gordon scale %s SERVICE=N", strings.Join(short, ", "), detail, app))
	}
}

// StartLocked is Start with the app lock held (Boot, R57); held is that
// hold's memo of checks.
func (e *Engine) StartLocked(ctx context.Context, held *steps.HeldChecks, req oprun.LifecycleRequest) (*oprun.OpResult, error) {
	if _, err := e.activeOrNeverDeployed(ctx, core.OpStart, req.App); err != nil {
		return nil, err
	}
	fp := steps.Fingerprint(core.OpStart, req.App)
	r, replay, err := e.ClaimLifecycle(ctx, core.OpStart, req, fp, []core.Step{{ID: steps.StepIntentRunning, State: core.StepPending}})
	if r == nil {
		return replay, err
	}
	r.Checks = held
	return e.Run(r).start(ctx)
}

// activeOrNeverDeployed loads ACTIVE; absent or without services is an
// error wrapping ErrConflict ("never deployed").
func (e *Engine) activeOrNeverDeployed(ctx context.Context, kind, app string) (core.Active, error) {
	a, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) || (err == nil && len(a.Services) == 0) {
		return core.Active{}, fmt.Errorf("%w: %s %s: app was never deployed", core.ErrConflict, kind, app)
	}
	if err != nil {
		return core.Active{}, fmt.Errorf("%s %s: load ACTIVE: %w", kind, app, err)
	}
	return a, nil
}

// start is R51 after the claim.
func (r *LifecycleRun) start(ctx context.Context) (*oprun.OpResult, error) {
	e, app := r.E, r.App
	if err := e.SetIntent(ctx, app, r.Op.ID, false); err != nil {
		r.Fail(ctx, steps.StepError, err)
		return r.Result(), err
	}
	r.SetStep(0, core.StepSucceeded, "")
	r.Save(ctx)
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		err = fmt.Errorf("start %s: load ACTIVE: %w", app, err)
		r.Fail(ctx, steps.StepError, err)
		return r.Result(), err
	}
	for _, name := range steps.ActiveServiceNames(active) {
		r.startService(ctx, name, active.Services[name])
	}
	r.Finalize()
	r.Save(ctx)
	if err := e.Rebuild(ctx); err != nil {
		err = fmt.Errorf("start %s: %w", app, err)
		r.Fail(ctx, steps.StepTrafficPublish, err)
		return r.Result(), err
	}
	r.RecordExecutions(ctx)
	return r.Result(), nil
}

// startService is R51's per-service part.
func (r *LifecycleRun) startService(ctx context.Context, name string, as *core.ActiveService) {
	e, app := r.E, r.App
	id := ""
	if as != nil {
		id = as.Container
	}
	i := r.StepAt(steps.ServiceStepID(name, "start"), name, id)
	r.Save(ctx) // R5.1: the step is journaled before runtime work
	ss := r.NewSvcStep(i, "start", name, id, as)
	fail := func(err error, diags []string) { ss.Fail(ctx, err, diags, true) }
	succeed := ss.Succeed
	if as == nil {
		fail(fmt.Errorf("no ACTIVE record"), nil)
		return
	}
	if as.AsleepSince != nil { // R81: boot keeps it asleep; a request wakes it
		ss.Res.Result = steps.ResultUnchanged
		r.Op.Steps[i].Detail = "asleep since " + as.AsleepSince.UTC().Format(time.RFC3339)
		r.SetStep(i, core.StepSucceeded, "")
		r.Results = append(r.Results, ss.Res)
		return
	}
	if id != "" {
		// 1. Recorded container: policy, markers, then verify or start.
		if _, err := e.ResolveBinds(r.Checks, r.App, &as.Spec); err != nil {
			fail(err, nil)
			return
		}
		markers, err := e.Store.LoadMarkers(ctx, app)
		if err != nil {
			fail(fmt.Errorf("load markers: %w", err), nil)
			return
		}
		if m, ok := oprun.BlockingMarker(markers, id); ok {
			fail(fmt.Errorf("recovery inhibited for container %s (%s marker by op %s)", id, m.Reason, m.Operation), nil)
			return
		}
		st, ierr := e.Runtime.InspectContainer(ctx, id)
		startable := ierr == nil
		if ierr == nil && !st.Running() {
			r.Emit(name, steps.PhaseStart, id, false)
			if err := e.Runtime.StartContainer(ctx, id); err != nil {
				e.Log().Warn("start recorded container failed; rebuilding", "app", app, "service", name, "container", id, "error", err)
				startable = false
			}
		} else if ierr != nil && !errors.Is(ierr, core.ErrNotFound) {
			fail(fmt.Errorf("inspect %s: %w", id, ierr), nil)
			return
		}
		if startable {
			ep, t, err := r.verifyRunning(ctx, name, as)
			if err != nil {
				fail(err, nil)
				return
			}
			succeed(id, ep, t)
			return
		}
	}
	// 2. Rebuild from the pinned revision (R54).
	rb, err := r.RebuildMissing(ctx, name, as, i)
	ss.Res.Warnings = append(ss.Res.Warnings, rb.Warnings...)
	if err != nil {
		if rb.After != "" {
			r.Op.Steps[i].After = rb.After
		}
		fail(err, rb.Diagnostics)
		return
	}
	ss.Res.Flow = steps.FlowSequential
	succeed(rb.After, steps.ResultEndpoints(rb), rb.StartedAt)
}

// verifyRunning is SPEC R52: withdraw (must succeed); observe the start
// time; re-read binds and register claims; persist them into ACTIVE; run
// the DECLARED readiness on the fresh binds. Routing happens once after
// the caller's loop. The caller drops the binds on failure.
func (r *LifecycleRun) verifyRunning(ctx context.Context, name string, as *core.ActiveService) (ep steps.Endpoints, startedAt time.Time, err error) {
	e, app, id := r.E, r.App, as.Container
	if err := e.Withdraw(ctx, app, name); err != nil {
		return steps.Endpoints{}, time.Time{}, fmt.Errorf("withdraw: %w", err)
	}
	st, err := e.Runtime.InspectContainer(ctx, id)
	if err != nil {
		return steps.Endpoints{}, time.Time{}, fmt.Errorf("inspect %s: %w", id, err)
	}
	ep, err = e.ReadBinds(ctx, app, id, &as.Spec)
	if err != nil {
		return steps.Endpoints{}, time.Time{}, err
	}
	if err := e.persistBinds(ctx, app, name, id, ep); err != nil {
		return steps.Endpoints{}, time.Time{}, err
	}
	if err := e.ProbeRunning(ctx, app, name, &as.Spec, readiness.DeclaredReadiness(&as.Spec), id, st.StartedAt, ep); err != nil {
		return steps.Endpoints{}, time.Time{}, err
	}
	return ep, st.StartedAt, nil
}

// persistBinds writes the service's binds into ACTIVE when it still names
// container (else ErrConflict: ACTIVE changed under us).
func (e *Engine) persistBinds(ctx context.Context, app, name, container string, ep steps.Endpoints) error {
	a, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		return fmt.Errorf("persist binds: load ACTIVE: %w", err)
	}
	cur := a.Services[name]
	if cur == nil || cur.Container != container {
		return fmt.Errorf("%w: persist binds: ACTIVE no longer names %s", core.ErrConflict, container)
	}
	ep.SetOn(cur)
	cur.HoldUntil = nil
	if err := e.Store.SaveActive(ctx, a); err != nil {
		return fmt.Errorf("persist binds: save ACTIVE: %w", err)
	}
	return nil
}
