package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Remove removes an app (SPEC R49, R55): claim (no steps); load ACTIVE;
// persist stopped intent BEFORE any runtime effect; per ACTIVE service
// (name order): persist a `removed` marker for its container (failure
// aborts), retire it (its stop grace, clear-marker, retry-on-leak) —
// not gone aborts with "container <id> not confirmed gone", unreleased
// claims abort too (the marker stays for the retry) — else step
// `service.<name>.remove` succeeded, result deployed. Then EVERY
// `retirement-pending` marker is retired with retry-on-leak (all attempted;
// any unsettled one, leaked claims included, is a failure and keeps its
// marker; errors joined). An abort is R11
// (`error` step; the per-service steps are kept, decision 8): ACTIVE,
// intent, remaining markers and claims stay and the incarnation is NOT
// ended. Otherwise: load ownership, reclaim networks (see below), end the
// incarnation (Store.EndIncarnation: ownership archived with its retained
// volumes and secrets under the old id; desired, ACTIVE, intent, markers
// and recovery cleared), outcome success, save, rebuild traffic (rejection
// → R11 `traffic.publish`, error).
//
// Volumes and secrets are kept (R3). The app's private networks (the
// ownership record's, else gordon-<app>) are removed once its containers
// are gone when the runtime implements NetworkRemover; a network that
// cannot be removed (another container still attached) is a warning
// naming it, never a failure.
//
// Errors: empty app or a service selection → ErrInvalid; unknown app →
// ErrNotFound (a replayed key of a removed app still replays); lock/R7/R8
// refusals and aborts → ErrConflict or the store's class.
func (e *Engine) Remove(ctx context.Context, req LifecycleRequest) (*OpResult, error) {
	if err := e.RequireLiveTraffic(ctx, core.OpRemove); err != nil {
		return nil, err
	}
	if err := refuseServices(core.OpRemove, req); err != nil {
		return nil, err
	}
	fp := Fingerprint(core.OpRemove, req.App)
	lk, res, ok, err := e.lifecyclePreamble(ctx, core.OpRemove, req, fp)
	if !ok {
		return res, err
	}
	defer lk.Unlock()
	r, replay, err := e.claimLifecycle(ctx, core.OpRemove, req, fp, nil)
	if r == nil {
		return replay, err
	}
	return r.remove(ctx)
}

// remove is R55 after the claim.
func (r *lifecycleRun) remove(ctx context.Context) (*OpResult, error) {
	e, app := r.e, r.app
	abort := func(err error) (*OpResult, error) {
		r.fail(ctx, StepError, err)
		return r.result(), err
	}
	active, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		active, err = core.Active{App: app}, nil
	}
	if err != nil {
		return abort(fmt.Errorf("remove %s: load ACTIVE: %w", app, err))
	}
	if err := e.setIntent(ctx, app, r.op.ID, true); err != nil {
		return abort(fmt.Errorf("remove %s: %w", app, err))
	}
	for _, name := range activeServiceNamesReverse(active) {
		as := active.Services[name]
		if err := r.removeService(ctx, name, as); err != nil {
			return abort(err)
		}
	}
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		return abort(fmt.Errorf("remove %s: load markers: %w", app, err))
	}
	var errs []error
	for _, m := range markers {
		if m.Reason != core.MarkerRetirementPending {
			continue
		}
		// Retry-on-leak (R55, R5(9)): a failed claim release keeps the
		// marker, so the aborted remove is retried instead of leaking it.
		rr := e.retire(ctx, app, m.Container, RetireOptions{Service: m.Service, Grace: EffectiveGrace(m.StopGrace), ClearMarker: true, RetryOnLeak: true})
		if len(rr.Warnings) > 0 {
			res := r.resultFor(m.Service)
			res.Warnings = append(res.Warnings, rr.Warnings...)
		}
		if !rr.Settled {
			errs = append(errs, fmt.Errorf("superseded container %s (service %s) not retired: %w", m.Container, m.Service, rr.Err(m.Container)))
		}
	}
	// Every container labelled for the app that no record owns goes too
	// (a candidate a crash left unjournaled): the incarnation ends only
	// once none is left (R5.10).
	if _, err := e.removeUnowned(ctx, app); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return abort(fmt.Errorf("remove %s: %w", app, errors.Join(errs...)))
	}
	own, err := e.Store.LoadOwnership(ctx, app)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return abort(fmt.Errorf("remove %s: load ownership: %w", app, err))
	}
	r.reclaimNetworks(ctx, own)
	if err := e.Store.EndIncarnation(ctx, app); err != nil {
		return abort(fmt.Errorf("remove %s: end incarnation: %w", app, err))
	}
	r.finalize()
	r.op.Outcome = core.OutcomeSuccess // every container is gone; warnings never fail it
	r.save(ctx)
	if err := e.rebuild(ctx); err != nil {
		err = fmt.Errorf("remove %s: %w", app, err)
		r.fail(ctx, StepTrafficPublish, err)
		return r.result(), err
	}
	return r.result(), nil
}

// removeService is R55's per-service part; an error aborts the remove.
func (r *lifecycleRun) removeService(ctx context.Context, name string, as *core.ActiveService) error {
	e, app := r.e, r.app
	id := ""
	var grace core.Duration
	if as != nil {
		id, grace = as.Container, as.Spec.StopGrace
	}
	i := r.stepAt(ServiceStepID(name, "remove"), name, id)
	res := ServiceResult{Service: name, Before: id}
	failWith := func(err error) error {
		res.Result, res.Error = ResultFailed, err.Error()
		r.setStep(i, core.StepFailed, err.Error())
		r.results = append(r.results, res)
		r.progress(name, PhaseFailed, err.Error(), true)
		return err
	}
	if id != "" {
		// Routes leave first, as for stop: an aborted remove never leaves
		// a route to a container it stopped.
		if err := e.withdraw(ctx, app, name); err != nil {
			return failWith(fmt.Errorf("remove %s: service %s: withdraw: %w", app, name, err))
		}
		// Replicas first, the primary last: every instance is removed the
		// same way.
		for _, inst := range slices.Backward(as.Instances()) {
			id := inst.Container
			m := core.Marker{App: app, Service: name, Container: id, Reason: core.MarkerRemoved, Operation: r.op.ID, CreatedAt: e.now()}
			if err := e.Store.SaveMarker(ctx, m); err != nil {
				return failWith(fmt.Errorf("remove %s: service %s: save removed marker for %s: %w", app, name, id, err))
			}
			rr := e.retire(ctx, app, id, RetireOptions{Service: name, Grace: EffectiveGrace(grace), ClearMarker: true, RetryOnLeak: true})
			res.Warnings = append(res.Warnings, rr.Warnings...)
			if !rr.Gone {
				return failWith(fmt.Errorf("remove %s: service %s: container %s not confirmed gone: %w", app, name, id, rr.Err(id)))
			}
			if !rr.Settled {
				// Its claims are still registered: abort (ACTIVE and the
				// marker stay) so a repeated remove releases them.
				return failWith(fmt.Errorf("remove %s: service %s: container %s removed but its port claims were not released (run remove again): %w", app, name, id, rr.Err(id)))
			}
		}
	}
	res.Result = ResultDeployed
	r.setStep(i, core.StepSucceeded, "")
	r.results = append(r.results, res)
	r.progress(name, PhaseDone, "removed "+id, true)
	return nil
}

// reclaimNetworks is R55's network reclaim: remove the app's private
// networks (own.Networks, else NetworkName(app)); failures are warnings.
func (r *lifecycleRun) reclaimNetworks(ctx context.Context, own core.Ownership) {
	nr, ok := r.e.Runtime.(core.NetworkRemover)
	if !ok {
		return
	}
	nets := own.Networks
	if len(nets) == 0 {
		nets = []string{NetworkName(r.app)}
	}
	for _, n := range nets {
		if err := nr.RemoveNetwork(ctx, n); err != nil && !errors.Is(err, core.ErrNotFound) && !errors.Is(err, errors.ErrUnsupported) {
			r.appWarnings = append(r.appWarnings, core.Warning{Leftover: n, Detail: "network " + n + " kept: " + err.Error()})
		}
	}
}
