package deploy

import (
	"context"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// restartOverlap is R53's restart of an overlap-eligible service (R16
// canOverlap of its ACTIVE spec with itself): an overlap (R18) of the same
// spec on the caller's step i, so the service keeps answering throughout.
// The ACTIVE record is pinned as a rebuild pins it (R54: recorded revision,
// image and digest; env, secrets and binds as of now); a pending withdrawal
// is retried first; the candidate is created (R17: journaled as After on
// step i before it starts, deploy-time readiness); the recorded container
// gets a retirement-pending marker with its own grace and signal; ACTIVE
// names the candidate (R21a, same revision, image and digest); traffic is
// rebuilt (the switch); then the old container is drained and retired with
// its own grace (R22, clear-marker). Before the switch a failure leaves the
// old container serving untouched (a created candidate is removed, R24).
// The returned result carries After (also on failure when a candidate was
// created), binds, the verified start time, warnings and diagnostics.
func (r *LifecycleRun) RestartOverlap(ctx context.Context, name string, as *core.ActiveService, i int) (steps.ServiceResult, error) {
	e, app := r.E, r.App
	out := steps.ServiceResult{Service: name, Before: as.Container, Flow: steps.FlowOverlap}
	start := time.Now()
	rev, err := e.resolveRevision(ctx, app, as.EffectiveRevision)
	if err != nil {
		return out, fmt.Errorf("restart: %w", err)
	}
	info, err := e.Store.LoadApp(ctx, app)
	if err != nil {
		return out, fmt.Errorf("restart: app %s: %w", app, err)
	}
	pin, err := r.rebuildPin(ctx, name, as, rev, start)
	if err != nil {
		return out, err
	}
	active, err := e.LoadActive(ctx, app)
	if err != nil {
		return out, fmt.Errorf("restart: %w", err)
	}
	d := &deployRun{e: e, op: r.Op, rev: rev, app: app, info: info, pinned: []*pinnedService{pin}, active: active}
	step := &r.Op.Steps[i]
	s := &serviceRun{d: d, ps: PlannedService{Service: name, Action: ActionOverlap, Before: as.Container, Image: pin.img},
		pin: pin, step: step, res: out, before: as.Container, prev: as,
		predGrace: steps.EffectiveGrace(as.Spec.StopGrace), start: start, timer: phaseTimer{step: step}}
	fail := func(err error, diags []string) (steps.ServiceResult, error) {
		res := s.res
		res.After, res.Diagnostics = s.after, diags
		return res, err
	}
	// R18.2: a pending withdrawal is retried before any candidate exists.
	if err := e.RetryPendingWithdrawals(ctx, app, name); err != nil {
		return fail(err, nil)
	}
	// R18.4 candidate creation.
	if err, diags := s.createCandidate(ctx); err != nil {
		return fail(err, diags)
	}
	// R18.5 retirement-pending for the recorded container.
	m := core.Marker{App: app, Service: name, Container: s.before, Reason: core.MarkerRetirementPending,
		Operation: r.Op.ID, CreatedAt: e.Now(), StopGrace: core.Duration(s.predGrace), StopSignal: as.StopSignal}
	if err := e.Store.SaveMarker(ctx, m); err != nil {
		s.dropCandidate(ctx, s.after)
		return fail(fmt.Errorf("save retirement-pending marker for %s: %w", s.before, err), nil)
	}
	// R21a publish ACTIVE, then switch traffic to the candidate.
	if err := r.publishRebuilt(ctx, s, as); err != nil {
		return fail(err, nil)
	}
	if err := e.Rebuild(ctx); err != nil {
		s.warn(core.Warning{Service: name, Leftover: s.before, Detail: "superseded container kept running: the new generation " +
			s.after + " was not confirmed as routed (" + err.Error() + ")"})
		return fail(fmt.Errorf("switch traffic to %s: %w", s.after, err), nil)
	}
	// R22: drain the old generation, then retire it with its own grace.
	s.retireSuperseded(ctx)
	res := s.res
	res.After, res.StartedAt = s.after, s.startedAt
	steps.EndpointsOf(s.binds).SetOnResult(&res)
	return res, nil
}
