package engine

import (
	"context"
	"errors"
	"fmt"

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
func (e *Engine) Stop(ctx context.Context, req LifecycleRequest) (*OpResult, error) {
	if err := e.RequireLiveTraffic(ctx, core.OpStop); err != nil {
		return nil, err
	}
	if err := refuseServices(core.OpStop, req); err != nil {
		return nil, err
	}
	fp := Fingerprint(core.OpStop, req.App)
	lk, res, ok, err := e.lifecyclePreamble(ctx, core.OpStop, req, fp)
	if !ok {
		return res, err
	}
	defer lk.Unlock()
	r, replay, err := e.claimLifecycle(ctx, core.OpStop, req, fp, []core.Step{{ID: StepIntentStopped, State: core.StepPending}})
	if r == nil {
		return replay, err
	}
	return r.stop(ctx)
}

// stop is R50 after the claim.
func (r *lifecycleRun) stop(ctx context.Context) (*OpResult, error) {
	e, app := r.e, r.app
	if err := e.setIntent(ctx, app, r.op.ID, true); err != nil {
		r.fail(ctx, StepError, err)
		return r.result(), err
	}
	r.setStep(0, core.StepSucceeded, "")
	r.save(ctx)
	active, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		active, err = core.Active{App: app}, nil
	}
	if err != nil {
		err = fmt.Errorf("stop %s: load ACTIVE: %w", app, err)
		r.fail(ctx, StepError, err)
		return r.result(), err
	}
	named := map[string]bool{}
	for _, name := range activeServiceNamesReverse(active) {
		as := active.Services[name]
		for _, in := range as.Instances() {
			named[in.Container] = true
		}
		r.stopService(ctx, name, as)
	}
	r.retirePredecessors(ctx, named)
	r.finalize()
	r.save(ctx)
	if err := e.rebuild(ctx); err != nil {
		err = fmt.Errorf("stop %s: %w", app, err)
		r.fail(ctx, StepTrafficPublish, err)
		return r.result(), err
	}
	if r.appFailed {
		return r.result(), errors.Join(r.failedErr(core.OpStop), fmt.Errorf("%w: stop %s: %s", core.ErrConflict, app, r.appWarnings[len(r.appWarnings)-1].Detail))
	}
	return r.result(), r.failedErr(core.OpStop)
}

// stopService is R50's per-service part.
func (r *lifecycleRun) stopService(ctx context.Context, name string, as *core.ActiveService) {
	e, app := r.e, r.app
	id := ""
	var grace core.Duration
	if as != nil {
		id, grace = as.Container, as.Spec.StopGrace
	}
	i := r.stepAt(ServiceStepID(name, "stop"), name, id)
	res := ServiceResult{Service: name, Before: id}
	failWith := func(err error) {
		res.Result, res.Error = ResultFailed, err.Error()
		r.setStep(i, core.StepFailed, err.Error())
		r.results = append(r.results, res)
		r.progress(name, PhaseFailed, err.Error(), true)
	}
	if err := e.withdraw(ctx, app, name); err != nil {
		failWith(fmt.Errorf("%w: stop %s: service %s: withdraw: %w", core.ErrConflict, app, name, err))
		return
	}
	if id != "" {
		if err := r.stopReplicas(ctx, name, as, &res); err != nil {
			failWith(err)
			return
		}
		o := preStopOf(app, as)
		o.Service, o.Grace, o.ClearMarker = name, EffectiveGrace(grace), true
		rr := e.retire(ctx, app, id, o)
		res.Warnings = append(res.Warnings, rr.Warnings...)
		if !rr.Gone {
			failWith(fmt.Errorf("stop %s: service %s: container %s not stopped: %w", app, name, id, rr.Err(id)))
			return
		}
	}
	res.Result = ResultDeployed
	r.op.Steps[i].After = id
	r.setStep(i, core.StepSucceeded, "")
	r.results = append(r.results, res)
	r.progress(name, PhaseDone, "stopped "+id, true)
}

// stopReplicas retires the replicas of a stopped service (its grace,
// clear-marker) and drops them from ACTIVE: start brings the primary back
// (R51), and the next deploy or scale creates the missing instances (the
// plan sees fewer instances than the spec asks for).
func (r *lifecycleRun) stopReplicas(ctx context.Context, name string, as *core.ActiveService, res *ServiceResult) error {
	e, app := r.e, r.app
	if len(as.Replicas) == 0 {
		return nil
	}
	for _, id := range as.ReplicaIDs() {
		o := preStopOf(app, as)
		o.Service, o.Grace, o.ClearMarker = name, EffectiveGrace(as.Spec.StopGrace), true
		rr := e.retire(ctx, app, id, o)
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
func (r *lifecycleRun) retirePredecessors(ctx context.Context, named map[string]bool) {
	e, app := r.e, r.app
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		w := core.Warning{Detail: "pending retirements unknown: " + err.Error()}
		r.appWarnings = append(r.appWarnings, w)
		r.appFailed = true
		i := r.stepAt(StepPendingRetire, "", "")
		r.setStep(i, core.StepFailed, w.Detail)
		return
	}
	for _, m := range markers {
		if m.Reason != core.MarkerRetirementPending {
			continue
		}
		if named[m.Container] {
			if err := e.Store.ClearMarker(ctx, app, m.Service, m.Container); err != nil {
				r.appWarnings = append(r.appWarnings, core.Warning{Service: m.Service, Leftover: m.Container,
					Detail: "clear recovery inhibition: " + err.Error()})
			}
			continue
		}
		rr := e.retire(ctx, app, m.Container, RetireOptions{Service: m.Service, Grace: EffectiveGrace(m.StopGrace),
			ClearMarker: true, RetryOnLeak: true})
		if rr.Settled && len(rr.Warnings) == 0 {
			continue
		}
		res := r.resultFor(m.Service) // decision 7: only when it produced a warning or a failure
		res.Warnings = append(res.Warnings, rr.Warnings...)
		if !rr.Settled {
			msg := fmt.Sprintf("superseded container %s was not retired: %v", m.Container, rr.Err(m.Container))
			res.Result = ResultFailed
			if res.Error != "" {
				res.Error += "; " + msg
			} else {
				res.Error = msg
			}
			if st := r.op.Step(ServiceStepID(m.Service, "stop")); st != nil {
				st.State, st.Error, st.UpdatedAt = core.StepFailed, res.Error, e.now()
			} else {
				i := r.stepAt(ServiceStepID(m.Service, "stop"), m.Service, m.Container)
				r.setStep(i, core.StepFailed, msg)
			}
		} else if res.Result == "" {
			res.Result = ResultDeployed
		}
	}
}
