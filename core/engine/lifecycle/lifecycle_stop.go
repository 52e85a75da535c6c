package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Stop stops an app (SPEC R49, R50): under the app lock, after store
// self-recovery and interrupted-op reconciliation, it claims an op with
// `intent.stopped` pending, persists stopped intent before any runtime
// effect, then per ACTIVE service (name order, step
// `service.<name>.stop`): withdraw, retire the container (its own stop
// grace, clear-marker, no retry-on-leak). ACTIVE keeps the container IDs
// (start rebuilds from them). Then every `retirement-pending` predecessor
// is retired (marker grace, clear-marker, retry-on-leak; decision 7 for
// services absent from ACTIVE); a marker load failure is an app warning
// "pending retirements unknown: …", a failed `pending.retire` step and
// outcome failed. Finally traffic is rebuilt once; a rejection is R11 with
// a failed `traffic.publish` step.
//
// Errors: empty app or a service selection → ErrInvalid; unknown app →
// ErrNotFound; lock, R7 and R8 refusals → ErrConflict; any failed service
// → ErrConflict listing them. The result is non-nil whenever an op was
// claimed or replayed.
func (e *Engine) Stop(ctx context.Context, req oprun.LifecycleRequest) (*oprun.OpResult, error) {
	if err := e.RequireLiveTraffic(ctx, core.OpStop); err != nil {
		return nil, err
	}
	if err := oprun.RefuseServices(core.OpStop, req); err != nil {
		return nil, err
	}
	fp := steps.Fingerprint(core.OpStop, req.App)
	lk, res, ok, err := e.LifecyclePreamble(ctx, core.OpStop, req, fp)
	if !ok {
		return res, err
	}
	defer lk.Unlock()
	r, replay, err := e.ClaimLifecycle(ctx, core.OpStop, req, fp, []core.Step{{ID: steps.StepIntentStopped, State: core.StepPending}})
	if r == nil {
		return replay, err
	}
	r.Checks = lk.Checks
	return e.Run(r).stop(ctx)
}

// stop is R50 after the claim.
func (r *LifecycleRun) stop(ctx context.Context) (*oprun.OpResult, error) {
	e, app := r.E, r.App
	if err := e.SetIntent(ctx, app, r.Op.ID, true); err != nil {
		r.Fail(ctx, steps.StepError, err)
		return r.Result(), err
	}
	r.SetStep(0, core.StepSucceeded, "")
	r.Save(ctx)
	active, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		active, err = core.Active{App: app}, nil
	}
	if err != nil {
		err = fmt.Errorf("stop %s: load ACTIVE: %w", app, err)
		r.Fail(ctx, steps.StepError, err)
		return r.Result(), err
	}
	if err := r.endSleep(ctx, &active); err != nil {
		r.Fail(ctx, steps.StepError, err)
		return r.Result(), err
	}
	named := map[string]bool{}
	for _, name := range steps.ActiveServiceNamesReverse(active) {
		as := active.Services[name]
		for _, in := range as.Instances() {
			named[in.Container] = true
		}
		r.stopService(ctx, name, as)
	}
	r.retirePredecessors(ctx, named)
	r.Finalize()
	r.Save(ctx)
	if err := e.Rebuild(ctx); err != nil {
		err = fmt.Errorf("stop %s: %w", app, err)
		r.Fail(ctx, steps.StepTrafficPublish, err)
		return r.Result(), err
	}
	if r.AppFailed {
		return r.Result(), errors.Join(r.FailedErr(core.OpStop), fmt.Errorf("%w: stop %s: %s", core.ErrConflict, app, r.AppWarnings[len(r.AppWarnings)-1].Detail))
	}
	return r.Result(), r.FailedErr(core.OpStop)
}

// endSleep records every sleeping service of active awake (SPEC R81: a
// stop ends a sleep; start brings every service back and it sleeps again
// after its sleep_after).
func (r *LifecycleRun) endSleep(ctx context.Context, active *core.Active) error {
	changed := false
	for _, s := range active.Services {
		if s != nil && s.AsleepSince != nil {
			s.AsleepSince, changed = nil, true
		}
	}
	if !changed {
		return nil
	}
	if err := r.E.Store.SaveActive(ctx, *active); err != nil {
		return fmt.Errorf("stop %s: save ACTIVE: %w", r.App, err)
	}
	return nil
}

// stopService is R50's per-service part.
func (r *LifecycleRun) stopService(ctx context.Context, name string, as *core.ActiveService) {
	e, app := r.E, r.App
	id := ""
	var grace core.Duration
	if as != nil {
		id, grace = as.Container, as.Spec.StopGrace
	}
	i := r.StepAt(steps.ServiceStepID(name, "stop"), name, id)
	res := steps.ServiceResult{Service: name, Before: id}
	failWith := func(err error) {
		res.Result, res.Error = steps.ResultFailed, err.Error()
		r.SetStep(i, core.StepFailed, err.Error())
		r.Results = append(r.Results, res)
		r.Emit(name, steps.PhaseFailed, err.Error(), true)
	}
	if err := e.Withdraw(ctx, app, name); err != nil {
		failWith(fmt.Errorf("%w: stop %s: service %s: withdraw: %w", core.ErrConflict, app, name, err))
		return
	}
	if id != "" {
		if err := r.stopReplicas(ctx, name, as, &res); err != nil {
			failWith(err)
			return
		}
		o := steps.PreStopOf(app, as)
		o.Service, o.Grace, o.ClearMarker = name, steps.EffectiveGrace(grace), true
		rr := e.Retire(ctx, app, id, o)
		res.Warnings = append(res.Warnings, rr.Warnings...)
		if !rr.Gone {
			failWith(fmt.Errorf("stop %s: service %s: container %s not stopped: %w", app, name, id, rr.Err(id)))
			return
		}
	}
	res.Result = steps.ResultDeployed
	r.Op.Steps[i].After = id
	r.SetStep(i, core.StepSucceeded, "")
	r.Results = append(r.Results, res)
	r.Emit(name, steps.PhaseDone, "stopped "+id, true)
}

// stopReplicas retires the replicas of a stopped service (its grace,
// clear-marker) and drops them from ACTIVE: start brings the primary back
// (R51), and the next deploy or scale creates the missing instances (the
// plan sees fewer instances than the spec asks for).
func (r *LifecycleRun) stopReplicas(ctx context.Context, name string, as *core.ActiveService, res *steps.ServiceResult) error {
	e, app := r.E, r.App
	if len(as.Replicas) == 0 {
		return nil
	}
	for _, id := range as.ReplicaIDs() {
		o := steps.PreStopOf(app, as)
		o.Service, o.Grace, o.ClearMarker = name, steps.EffectiveGrace(as.Spec.StopGrace), true
		rr := e.Retire(ctx, app, id, o)
		res.Warnings = append(res.Warnings, rr.Warnings...)
		if !rr.Gone {
			return fmt.Errorf("stop %s: service %s: replica %s not stopped: %w", app, name, id, rr.Err(id))
		}
	}
	a, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		return fmt.Errorf("stop %s: service %s: load ACTIVE: %w", app, name, err)
	}
	if cur := a.Services[name]; cur != nil {
		cur.Replicas = nil
		if err := e.Store.SaveActive(ctx, a); err != nil {
			return fmt.Errorf("stop %s: service %s: save ACTIVE: %w", app, name, err)
		}
	}
	return nil
}

// retirePredecessors is R50's "pending predecessors": retire every
// retirement-pending marker (marker grace, clear-marker, retry-on-leak).
// A container ACTIVE names is never retired through a marker (R28): its
// marker is dropped instead.
func (r *LifecycleRun) retirePredecessors(ctx context.Context, named map[string]bool) {
	e, app := r.E, r.App
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		w := core.Warning{Detail: "pending retirements unknown: " + err.Error()}
		r.AppWarnings = append(r.AppWarnings, w)
		r.AppFailed = true
		i := r.StepAt(steps.StepPendingRetire, "", "")
		r.SetStep(i, core.StepFailed, w.Detail)
		return
	}
	for _, m := range markers {
		if m.Reason != core.MarkerRetirementPending {
			continue
		}
		if named[m.Container] {
			if err := e.Store.ClearMarker(ctx, app, m.Service, m.Container); err != nil {
				r.AppWarnings = append(r.AppWarnings, core.Warning{Service: m.Service, Leftover: m.Container,
					Detail: "clear recovery inhibition: " + err.Error()})
			}
			continue
		}
		rr := e.Retire(ctx, app, m.Container, steps.RetireOptions{Service: m.Service, Grace: steps.EffectiveGrace(m.StopGrace),
			ClearMarker: true, RetryOnLeak: true})
		if rr.Settled && len(rr.Warnings) == 0 {
			continue
		}
		res := r.ResultFor(m.Service) // decision 7: only when it produced a warning or a failure
		res.Warnings = append(res.Warnings, rr.Warnings...)
		if !rr.Settled {
			msg := fmt.Sprintf("superseded container %s was not retired: %v", m.Container, rr.Err(m.Container))
			res.Result = steps.ResultFailed
			if res.Error != "" {
				res.Error += "; " + msg
			} else {
				res.Error = msg
			}
			if st := r.Op.Step(steps.ServiceStepID(m.Service, "stop")); st != nil {
				st.State, st.Error, st.UpdatedAt = core.StepFailed, res.Error, e.Now()
			} else {
				i := r.StepAt(steps.ServiceStepID(m.Service, "stop"), m.Service, m.Container)
				r.SetStep(i, core.StepFailed, msg)
			}
		} else if res.Result == "" {
			res.Result = steps.ResultDeployed
		}
	}
}
