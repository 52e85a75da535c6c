package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gordon-deploy/docker-gordon/core/engine/jobs"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

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
func (e *Engine) Remove(ctx context.Context, req oprun.LifecycleRequest) (*oprun.OpResult, error) {
	if err := e.RequireLiveTraffic(ctx, core.OpRemove); err != nil {
		return nil, err
	}
	if err := oprun.RefuseServices(core.OpRemove, req); err != nil {
		return nil, err
	}
	fp := steps.Fingerprint(core.OpRemove, req.App)
	lk, res, ok, err := e.LifecyclePreamble(ctx, core.OpRemove, req, fp)
	if !ok {
		return res, err
	}
	defer lk.Unlock()
	r, replay, err := e.ClaimLifecycle(ctx, core.OpRemove, req, fp, nil)
	if r == nil {
		return replay, err
	}
	r.Checks = lk.Checks
	return e.Run(r).remove(ctx)
}

// remove is R55 after the claim.
func (r *LifecycleRun) remove(ctx context.Context) (*oprun.OpResult, error) {
	e, app := r.E, r.App
	abort := func(err error) (*oprun.OpResult, error) {
		r.Fail(ctx, steps.StepError, err)
		return r.Result(), err
	}
	active, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		active, err = core.Active{App: app}, nil
	}
	if err != nil {
		return abort(fmt.Errorf("remove %s: load ACTIVE: %w", app, err))
	}
	if err := e.SetIntent(ctx, app, r.Op.ID, true); err != nil {
		return abort(fmt.Errorf("remove %s: %w", app, err))
	}
	for _, name := range steps.ActiveServiceNamesReverse(active) {
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
		rr := e.Retire(ctx, app, m.Container, steps.RetireOptions{Service: m.Service, Grace: steps.EffectiveGrace(m.StopGrace), ClearMarker: true, RetryOnLeak: true})
		if len(rr.Warnings) > 0 {
			res := r.ResultFor(m.Service)
			res.Warnings = append(res.Warnings, rr.Warnings...)
		}
		if !rr.Settled {
			errs = append(errs, fmt.Errorf("superseded container %s (service %s) not retired: %w", m.Container, m.Service, rr.Err(m.Container)))
		}
	}
	// Every container labelled for the app that no record owns goes too
	// (a candidate a crash left unjournaled): the incarnation ends only
	// once none is left (R5.10).
	if _, err := e.RemoveUnowned(ctx, app); err != nil {
		errs = append(errs, err)
	}
	if err := r.removeJobRuns(ctx); err != nil {
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
	r.KeptVolumes = slices.Clone(own.Volumes)
	r.Finalize()
	r.Op.Outcome = core.OutcomeSuccess // every container is gone; warnings never fail it
	r.Save(ctx)
	if err := e.Rebuild(ctx); err != nil {
		err = fmt.Errorf("remove %s: %w", app, err)
		r.Fail(ctx, steps.StepTrafficPublish, err)
		return r.Result(), err
	}
	return r.Result(), nil
}

// removeService is R55's per-service part; an error aborts the remove.
func (r *LifecycleRun) removeService(ctx context.Context, name string, as *core.ActiveService) error {
	e, app := r.E, r.App
	id := ""
	var grace core.Duration
	if as != nil {
		id, grace = as.Container, as.Spec.StopGrace
	}
	i := r.StepAt(steps.ServiceStepID(name, "remove"), name, id)
	res := steps.ServiceResult{Service: name, Before: id}
	failWith := func(err error) error {
		res.Result, res.Error = steps.ResultFailed, err.Error()
		r.SetStep(i, core.StepFailed, err.Error())
		r.Results = append(r.Results, res)
		r.Emit(name, steps.PhaseFailed, err.Error(), true)
		return err
	}
	if id != "" {
		// Routes leave first, as for stop: an aborted remove never leaves
		// a route to a container it stopped.
		if err := e.Withdraw(ctx, app, name); err != nil {
			return failWith(fmt.Errorf("remove %s: service %s: withdraw: %w", app, name, err))
		}
		// Replicas first, the primary last: every instance is removed the
		// same way.
		for _, inst := range slices.Backward(as.Instances()) {
			id := inst.Container
			m := core.Marker{App: app, Service: name, Container: id, Reason: core.MarkerRemoved, Operation: r.Op.ID, CreatedAt: e.Now()}
			if err := e.Store.SaveMarker(ctx, m); err != nil {
				return failWith(fmt.Errorf("remove %s: service %s: save removed marker for %s: %w", app, name, id, err))
			}
			rr := e.Retire(ctx, app, id, steps.RetireOptions{Service: name, Grace: steps.EffectiveGrace(grace), ClearMarker: true, RetryOnLeak: true})
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
	res.Result = steps.ResultDeployed
	r.SetStep(i, core.StepSucceeded, "")
	r.Results = append(r.Results, res)
	r.Emit(name, steps.PhaseDone, "removed "+id, true)
	return nil
}

// reclaimNetworks is R55's network reclaim: remove the app's private
// networks (own.Networks, else NetworkName(app)); failures are warnings.
func (r *LifecycleRun) reclaimNetworks(ctx context.Context, own core.Ownership) {
	nr, ok := r.E.Runtime.(core.NetworkRemover)
	if !ok {
		return
	}
	nets := own.Networks
	if len(nets) == 0 {
		nets = []string{steps.NetworkName(r.App)}
	}
	for _, n := range nets {
		if err := nr.RemoveNetwork(ctx, n); err != nil && !errors.Is(err, core.ErrNotFound) && !errors.Is(err, errors.ErrUnsupported) {
			r.AppWarnings = append(r.AppWarnings, core.Warning{Leftover: n, Detail: "network " + n + " kept: " + err.Error()})
		}
	}
}

// removeJobRuns force-removes the containers of the app's job runs that
// are still going ([jobs.NAME], docs/jobs.md): a removed app runs
// nothing. The run that started one ends failed (its container is gone).
func (r *LifecycleRun) removeJobRuns(ctx context.Context) error {
	e, app := r.E, r.App
	info, err := e.Store.LoadApp(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("job runs: load app: %w", err)
	}
	cs, err := e.Runtime.ListManaged(ctx, map[string]string{core.LabelApp: app, core.LabelRole: jobs.RoleJob, core.LabelIncarnation: info.Incarnation})
	if err != nil {
		return fmt.Errorf("list the containers of its job runs: %w", err)
	}
	var errs []error
	for _, c := range cs {
		if err := e.Runtime.RemoveContainer(ctx, c.ID, true); err != nil && !errors.Is(err, core.ErrNotFound) {
			errs = append(errs, fmt.Errorf("job run container %s could not be removed: %w", readiness.ShortID(c.ID), err))
		}
	}
	return errors.Join(errs...)
}
