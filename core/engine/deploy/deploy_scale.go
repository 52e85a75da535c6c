package deploy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// onlyInstanceCount reports whether s differs from the serving generation
// cur only in its instance count (R69 incremental scale): the spec with
// cur's count is what R15 would keep unchanged, the count differs, and
// both are overlap-eligible (more than one instance needs that, R16).
func (in PlanInput) onlyInstanceCount(s *core.ServiceSpec, cur *core.ActiveService) bool {
	if s.Instances() == cur.Spec.Instances() || !core.CanOverlap(s, &cur.Spec) {
		return false
	}
	same := *s
	same.Replicas = cur.Spec.Replicas
	return in.changed(&same, cur) == ""
}

// scaleInPlace is R69's incremental scale (ActionScale): the serving
// generation keeps its instances, image, stop signal and activation, and
// only gains or loses instances. Up: the missing instances are created,
// started and probed in parallel (R17; each ID journaled as the step's
// Replicas before its start), then published beside the serving ones in
// one ACTIVE record and one route rebuild. Down: the surplus instances
// (the last ones; the primary is never among them) get retirement-pending
// markers, ACTIVE and the routes drop them, then each is drained and
// retired with its own stop signal and grace (R22). No before_switch or
// after_switch hook runs (nothing is switched); a new instance's
// post_start hook does (R72). A failure before the publish leaves the
// serving set as it was (new instances removed, markers cleared by R43.1).
func (s *serviceRun) scaleInPlace(ctx context.Context) error {
	have, want := s.prev.Instances(), s.pin.spec.Instances()
	s.res.Flow, s.res.Result = steps.FlowScale, steps.ResultDeployed
	s.after, s.res.After, s.step.After = s.before, s.before, s.before
	steps.ActiveEndpoints(s.prev).Clone().SetOnResult(&s.res)
	s.scaling = true
	if want > len(have) {
		return s.scaleUp(ctx, have, want)
	}
	return s.scaleDown(ctx, have, want)
}

// scaleUp adds instances len(have)..want-1 (see scaleInPlace). The first
// failure cancels the others and removes every instance it created.
func (s *serviceRun) scaleUp(ctx context.Context, have []core.Instance, want int) error {
	s.progress(steps.PhaseCreate, fmt.Sprintf("instances %d → %d", len(have), want), 0)
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runs := make([]instanceRun, want-len(have))
	var mu sync.Mutex
	var first *instanceRun
	var wg sync.WaitGroup
	for k := range runs {
		wg.Go(func() {
			r := s.createInstance(cctx, len(have)+k, want)
			mu.Lock()
			defer mu.Unlock()
			runs[k] = r
			if r.err != nil && first == nil {
				first = &runs[k]
				cancel(r.err)
			}
		})
	}
	wg.Wait()
	for _, r := range runs {
		s.warn(r.warnings...)
	}
	if first != nil {
		for _, r := range runs {
			if r.id != "" && r.err == nil {
				s.dropInstance(ctx, r)
			}
		}
		return s.fail(ctx, first.err, first.diags)
	}
	s.scaled = steps.CloneInstances(s.prev.Replicas)
	for _, r := range runs {
		s.scaled = append(s.scaled, steps.EndpointsOf(r.binds).Instance(r.id))
	}
	if err := s.publishAndRoute(ctx, true); err != nil {
		// What ACTIVE does not name is removed by R47 (the step journals
		// the new instances); what it names serves.
		return s.fail(ctx, err, nil)
	}
	return s.succeed(ctx, fmt.Sprintf("scaled up: %d → %d instances of %s", len(have), want, s.prev.Running()))
}

// scaleDown withdraws, drains and retires have[want:] (see scaleInPlace).
func (s *serviceRun) scaleDown(ctx context.Context, have []core.Instance, want int) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	surplus := have[want:]
	for _, old := range surplus {
		m := core.Marker{App: app, Service: name, Container: old.Container, Reason: core.MarkerRetirementPending,
			Operation: s.d.op.ID, CreatedAt: e.Now(), StopGrace: core.Duration(s.predGrace), StopSignal: s.prev.StopSignal}
		if err := e.Store.SaveMarker(ctx, m); err != nil {
			return s.fail(ctx, fmt.Errorf("save retirement-pending marker for %s: %w", old.Container, err), nil)
		}
	}
	s.scaled = steps.CloneInstances(have[1:want])
	if err := s.publishAndRoute(ctx, true); err != nil {
		return s.fail(ctx, err, nil)
	}
	s.retireInstances(ctx, surplus)
	return s.succeed(ctx, fmt.Sprintf("scaled down: %d → %d instances of %s", len(have), want, s.prev.Running()))
}

// retireInstances is R22 for ins, instances of s.prev that ACTIVE no
// longer names: wait for zero in-flight requests on their backends
// (decision 16's drain, bounded by the grace), then retire each with the
// generation's stop signal and grace (clear-marker, retry-on-leak), all
// at once. Never a failure: warnings only.
func (s *serviceRun) retireInstances(ctx context.Context, ins []core.Instance) {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	t := time.Now()
	limit := e.DrainLimit(s.predGrace)
	for _, addr := range backendAddrsOf(ins) {
		s.progress(steps.PhaseDrain, addr, 0)
		if _, err := e.WaitDrained(ctx, addr, limit); err != nil {
			e.Log().Warn("drain interrupted", "app", app, "service", name, "backend", addr, "error", err)
			break
		}
	}
	s.timer.done("drain", t)
	t = time.Now()
	// The instances retire in parallel (each with its own grace), as the
	// candidates were created: a 10-replica generation does not take 10
	// stop graces. Warnings are added in instance order.
	results := make([]steps.RetireResult, len(ins))
	var wg sync.WaitGroup
	for i, old := range ins {
		s.progress(steps.PhaseRetire, old.Container, 0)
		o := steps.PreStopOf(app, s.prev)
		o.Service, o.Grace, o.ClearMarker, o.RetryOnLeak = name, s.predGrace, true, true
		wg.Go(func() { results[i] = e.Retire(ctx, app, old.Container, o) })
	}
	wg.Wait()
	for i, r := range results {
		s.warn(r.Warnings...)
		if !r.Gone && len(r.Warnings) == 0 {
			s.warn(core.Warning{Service: name, Leftover: ins[i].Container, Detail: "superseded container not confirmed gone"})
		}
	}
	s.timer.done("retire", t)
}
