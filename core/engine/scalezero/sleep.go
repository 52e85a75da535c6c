package scalezero

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
)

// Sleep puts services of an app to sleep (SPEC R81), under the app lock:
// the selected services that run and are not asleep yet (req.Services, or
// every service) are marked asleep in ACTIVE with their binds dropped, and
// the routes rebuilt at once (new requests are held and ask for a wake
// from then on); then, dependants before what they depend on, every
// instance is stopped (not removed) with its own stop signal and grace,
// after its pre_stop hooks. The op is kind "sleep", one step
// `service.<name>.sleep` per service, its Detail the reason.
//
// Nothing to put to sleep returns (nil, nil) and journals nothing.
// Errors: unknown app → ErrNotFound; a stopped app, or a selected service
// an awake unselected service depends on → ErrConflict (nothing changed);
// lock and R7 refusals → ErrConflict; a rejected route rebuild restores
// ACTIVE and stops nothing (the error wraps the traffic backend's); an
// instance that did not stop fails its step (the service stays asleep:
// its routes still wake it).
func (e *Engine) Sleep(ctx context.Context, req Request) (*oprun.OpResult, error) {
	lreq := oprun.LifecycleRequest{App: req.App, OpKey: req.OpKey}
	fp := steps.Fingerprint(OpSleep, req.App, strings.Join(req.Services, ","))
	lk, res, ok, err := e.LifecyclePreamble(ctx, OpSleep, lreq, fp)
	if !ok {
		return res, err
	}
	defer lk.Unlock()
	active, names, err := e.sleepers(ctx, req)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	var stepsOf []core.Step
	for _, n := range names {
		stepsOf = append(stepsOf, core.Step{ID: steps.ServiceStepID(n, OpSleep), State: core.StepPending, Service: n, Before: active.Services[n].Container, Detail: req.Reason})
	}
	r, replay, err := e.ClaimLifecycle(ctx, OpSleep, lreq, fp, stepsOf)
	if r == nil {
		return replay, err
	}
	r.Checks = lk.Checks
	if err := e.markAsleep(ctx, req.App, names); err != nil {
		r.Fail(ctx, steps.StepError, err)
		return r.Result(), err
	}
	if err := e.Rebuild(ctx); err != nil {
		// Nothing stops while the edge still routes to it: ACTIVE as it was.
		err = fmt.Errorf("sleep %s: %w; nothing was stopped", req.App, err)
		if serr := e.Store.SaveActive(ctx, active); serr != nil {
			err = errors.Join(err, fmt.Errorf("restore ACTIVE: %w", serr))
		}
		r.Fail(ctx, steps.StepTrafficPublish, err)
		return r.Result(), err
	}
	for i, n := range names {
		e.stopInstances(ctx, r, i, n, active.Services[n])
	}
	r.Finalize()
	r.Save(ctx)
	return r.Result(), r.FailedErr(OpSleep)
}

// sleepers loads ACTIVE and returns the services req puts to sleep, in
// reverse dependency order: selected, with a container, not asleep.
func (e *Engine) sleepers(ctx context.Context, req Request) (core.Active, []string, error) {
	in, err := e.Store.LoadIntent(ctx, req.App)
	if err != nil {
		return core.Active{}, nil, fmt.Errorf("sleep %s: load intent: %w", req.App, err)
	}
	if in.Stopped {
		return core.Active{}, nil, fmt.Errorf("%w: sleep %s: the app is stopped; nothing runs to put to sleep", core.ErrConflict, req.App)
	}
	active, err := e.Store.LoadActive(ctx, req.App)
	if errors.Is(err, core.ErrNotFound) {
		return core.Active{}, nil, fmt.Errorf("%w: sleep %s: the app was never deployed", core.ErrConflict, req.App)
	}
	if err != nil {
		return core.Active{}, nil, fmt.Errorf("sleep %s: load ACTIVE: %w", req.App, err)
	}
	selected := map[string]bool{}
	for _, n := range req.Services {
		if active.Services[n] == nil {
			return core.Active{}, nil, fmt.Errorf("%w: sleep %s: no service %q (the app's services: %s)", core.ErrNotFound, req.App, n, strings.Join(steps.ActiveServiceNames(active), ", "))
		}
		selected[n] = true
	}
	var names []string
	for _, n := range steps.ActiveServiceNamesReverse(active) {
		s := active.Services[n]
		if (len(selected) > 0 && !selected[n]) || s == nil || s.Container == "" || s.AsleepSince != nil {
			continue
		}
		for _, d := range dependants(active, n) {
			if ds := active.Services[d]; ds.AsleepSince == nil && !selected[d] && len(selected) > 0 {
				return core.Active{}, nil, fmt.Errorf("%w: sleep %s: service %s depends on %s and stays awake; put both to sleep", core.ErrConflict, req.App, d, n)
			}
		}
		names = append(names, n)
	}
	return active, names, nil
}

// markAsleep records names as asleep since now in app's ACTIVE, their
// binds dropped (the edge's routes for them wake them from the rebuild on).
func (e *Engine) markAsleep(ctx context.Context, app string, names []string) error {
	a, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		return fmt.Errorf("sleep %s: load ACTIVE: %w", app, err)
	}
	now := e.Now().UTC()
	for _, n := range names {
		s := a.Services[n]
		if s == nil {
			continue
		}
		s.AsleepSince, s.HoldUntil = &now, nil
		steps.Endpoints{}.SetOn(s)
		for i := range s.Replicas {
			s.Replicas[i] = steps.Endpoints{}.Instance(s.Replicas[i].Container)
		}
	}
	if err := e.Store.SaveActive(ctx, a); err != nil {
		return fmt.Errorf("sleep %s: save ACTIVE: %w", app, err)
	}
	return nil
}

// stopInstances stops every instance of service name (step i): pre_stop
// hooks, then the stop signal fixed on the container and the service's
// grace. A container already gone or stopped counts as stopped.
func (e *Engine) stopInstances(ctx context.Context, r *oprun.LifecycleRun, i int, name string, as *core.ActiveService) {
	grace := steps.EffectiveGrace(as.Spec.StopGrace)
	var failed []string
	for _, in := range as.Instances() {
		o := steps.PreStopOf(r.App, as)
		o.Service = name
		ws := e.PreStop(ctx, r.App, in.Container, o)
		r.AppWarnings = append(r.AppWarnings, ws...)
		r.Emit(name, steps.PhaseStop, in.Container, false)
		if err := e.Runtime.StopContainer(ctx, in.Container, grace); err != nil && !errors.Is(err, core.ErrNotFound) {
			failed = append(failed, fmt.Sprintf("%s: %v", in.Container, err))
		}
	}
	res := steps.ServiceResult{Service: name, Before: as.Container, After: as.Container, Result: steps.ResultDeployed}
	if len(failed) > 0 {
		msg := fmt.Sprintf("sleep %s: service %s: instances not stopped: %s; they stop at the next sleep or wake", r.App, name, strings.Join(failed, "; "))
		res.Result, res.Error = steps.ResultFailed, msg
		r.SetStep(i, core.StepFailed, msg)
		r.Emit(name, steps.PhaseFailed, msg, true)
	} else {
		r.SetStep(i, core.StepSucceeded, "")
		r.Emit(name, steps.PhaseDone, fmt.Sprintf("asleep (%d instance(s) stopped)", len(as.Instances())), true)
	}
	r.Results = slices.DeleteFunc(r.Results, func(x steps.ServiceResult) bool { return x.Service == name })
	r.Results = append(r.Results, res)
}
