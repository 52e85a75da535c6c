package scalezero

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
)

// wakeProbeEvery is how far apart a wake's HTTP, TCP and plugin probe
// attempts are: requests are held on it, so it ends within this of the
// service answering (a deploy's probes keep R31's and R33's intervals).
const wakeProbeEvery = 25 * time.Millisecond

// Wake wakes sleeping services of an app (SPEC R81), under the app lock:
// the selected services that sleep (req.Services, or every one) and the
// sleeping services they depend on, in dependency order: every instance is
// started (at once, in parallel), its binds read from the live container,
// its declared readiness probed (attempts wakeProbeEvery apart), and the
// service recorded awake with its binds; the routes are rebuilt once at
// the end, which releases what the edge held. The op is kind "wake", one
// step `service.<name>.wake` per service, its phase "start_probe" and its
// Detail the reason and the time the wake took.
//
// A service that does not wake fails its step and is recorded awake
// without binds: its routes answer 503 at once (never a Docker error),
// and the periodic pass recovers it as any service without a ready
// instance. Nothing asleep returns (nil, nil) and journals nothing.
// Errors: unknown app → ErrNotFound; a stopped app → ErrConflict; lock and
// R7 refusals → ErrConflict; a failed service → ErrConflict naming it.
func (e *Engine) Wake(ctx context.Context, req Request) (*oprun.OpResult, error) {
	lreq := oprun.LifecycleRequest{App: req.App, OpKey: req.OpKey}
	fp := steps.Fingerprint(OpWake, req.App, strings.Join(req.Services, ","))
	lk, res, ok, err := e.LifecyclePreamble(ctx, OpWake, lreq, fp)
	if !ok {
		return res, err
	}
	defer lk.Unlock()
	return e.WakeLocked(ctx, lk.Checks, req)
}

// WakeLocked is Wake with the app lock held (the verbs that wake first);
// held is that hold's memo of checks.
func (e *Engine) WakeLocked(ctx context.Context, held *steps.HeldChecks, req Request) (*oprun.OpResult, error) {
	lreq := oprun.LifecycleRequest{App: req.App, OpKey: req.OpKey}
	fp := steps.Fingerprint(OpWake, req.App, strings.Join(req.Services, ","))
	active, names, err := e.sleeping(ctx, req)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	var stepsOf []core.Step
	for _, n := range names {
		stepsOf = append(stepsOf, core.Step{ID: steps.ServiceStepID(n, OpWake), State: core.StepPending, Service: n, Before: active.Services[n].Container, Detail: req.Reason})
	}
	r, replay, err := e.ClaimLifecycle(ctx, OpWake, lreq, fp, stepsOf)
	if r == nil {
		return replay, err
	}
	r.Checks = held
	for i, n := range names {
		e.wakeService(ctx, r, i, n, active.Services[n])
	}
	r.Finalize()
	r.Save(ctx)
	if err := e.Rebuild(ctx); err != nil {
		err = fmt.Errorf("wake %s: %w", req.App, err)
		r.Fail(ctx, steps.StepTrafficPublish, err)
		return r.Result(), err
	}
	return r.Result(), r.FailedErr(OpWake)
}

// sleeping loads ACTIVE and returns the services req wakes, in dependency
// order: the selected sleeping ones and the sleeping ones they depend on.
func (e *Engine) sleeping(ctx context.Context, req Request) (core.Active, []string, error) {
	in, err := e.Store.LoadIntent(ctx, req.App)
	if err != nil {
		return core.Active{}, nil, fmt.Errorf("wake %s: load intent: %w", req.App, err)
	}
	if in.Stopped {
		return core.Active{}, nil, fmt.Errorf("%w: wake %s: the app is stopped; start it with: docker gordon start %s", core.ErrConflict, req.App, req.App)
	}
	active, err := e.Store.LoadActive(ctx, req.App)
	if errors.Is(err, core.ErrNotFound) {
		return core.Active{}, nil, nil
	}
	if err != nil {
		return core.Active{}, nil, fmt.Errorf("wake %s: load ACTIVE: %w", req.App, err)
	}
	want := map[string]bool{}
	var add func(n string)
	add = func(n string) {
		s := active.Services[n]
		if s == nil || want[n] {
			return
		}
		want[n] = true
		for _, d := range s.Spec.DependsOn {
			add(d)
		}
	}
	for _, n := range req.Services {
		if active.Services[n] == nil {
			return core.Active{}, nil, fmt.Errorf("%w: wake %s: no service %q (the app's services: %s)", core.ErrNotFound, req.App, n, strings.Join(steps.ActiveServiceNames(active), ", "))
		}
		add(n)
	}
	var names []string
	for _, n := range steps.ActiveServiceNames(active) {
		if s := active.Services[n]; s.AsleepSince != nil && (len(req.Services) == 0 || want[n]) {
			names = append(names, n)
		}
	}
	return active, names, nil
}

// wakeService starts, reads and probes every instance of service name
// (step i), then records it awake with the endpoints it found.
func (e *Engine) wakeService(ctx context.Context, r *oprun.LifecycleRun, i int, name string, as *core.ActiveService) {
	t0 := time.Now()
	r.Save(ctx) // R5.1: the step is journaled before runtime work
	ss := r.NewSvcStep(i, OpWake, name, as.Container, as)
	instances := as.Instances()
	eps := make([]steps.Endpoints, len(instances))
	errs := make([]error, len(instances))
	var started time.Time
	var wg sync.WaitGroup
	for k, in := range instances {
		wg.Go(func() {
			ep, st, err := e.startInstance(ctx, r.App, name, as, in.Container)
			eps[k], errs[k] = ep, err
			if k == 0 {
				started = st
			}
		})
	}
	wg.Wait()
	r.Op.Steps[i].Phases = map[string]core.Duration{"start_probe": core.Duration(time.Since(t0))}
	if err := errors.Join(errs...); err != nil {
		e.recordAwake(ctx, r.App, name, nil)
		ss.Fail(ctx, err, nil, false)
		return
	}
	if err := e.recordAwake(ctx, r.App, name, eps); err != nil {
		ss.Fail(ctx, err, nil, false)
		return
	}
	r.Op.Steps[i].Detail = strings.TrimPrefix(r.Op.Steps[i].Detail+"; ", "; ") + "woke in " + time.Since(t0).Round(time.Millisecond).String()
	ss.Succeed(as.Container, eps[0], started)
}

// startInstance starts one stopped instance (a running one is left as it
// is), reads its binds and probes its declared readiness on them.
func (e *Engine) startInstance(ctx context.Context, app, name string, as *core.ActiveService, id string) (steps.Endpoints, time.Time, error) {
	st, err := e.Runtime.InspectContainer(ctx, id)
	if err != nil {
		return steps.Endpoints{}, time.Time{}, fmt.Errorf("instance %s: %w", id, err)
	}
	if !st.Running() {
		if err := e.Runtime.StartContainer(ctx, id); err != nil {
			return steps.Endpoints{}, time.Time{}, fmt.Errorf("start instance %s: %w", id, err)
		}
		if st, err = e.Runtime.InspectContainer(ctx, id); err != nil {
			return steps.Endpoints{}, time.Time{}, fmt.Errorf("instance %s: %w", id, err)
		}
	}
	ep, err := e.ReadBinds(ctx, app, id, &as.Spec)
	if err != nil {
		return steps.Endpoints{}, time.Time{}, err
	}
	if err := e.ProbeRunningEvery(ctx, wakeProbeEvery, app, name, &as.Spec, readiness.DeclaredReadiness(&as.Spec), id, st.StartedAt, ep); err != nil {
		return steps.Endpoints{}, time.Time{}, err
	}
	return ep, st.StartedAt, nil
}

// recordAwake clears the service's AsleepSince in ACTIVE and records eps
// as its instances' endpoints (primary first; nil: none, so it is not
// routed and answers 503 until the periodic pass recovers it).
func (e *Engine) recordAwake(ctx context.Context, app, name string, eps []steps.Endpoints) error {
	a, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		return fmt.Errorf("record awake: load ACTIVE: %w", err)
	}
	s := a.Services[name]
	if s == nil {
		return fmt.Errorf("%w: record awake: service %s left ACTIVE", core.ErrConflict, name)
	}
	s.AsleepSince = nil
	if len(eps) > 0 {
		eps[0].SetOn(s)
		for k := range s.Replicas {
			if k+1 < len(eps) {
				s.Replicas[k] = eps[k+1].Instance(s.Replicas[k].Container)
			}
		}
	}
	if err := e.Store.SaveActive(ctx, a); err != nil {
		return fmt.Errorf("record awake: save ACTIVE: %w", err)
	}
	return nil
}
