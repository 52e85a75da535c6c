package deploy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// serviceRun is one service step in progress (R14).
type serviceRun struct {
	d      *deployRun
	ps     PlannedService
	pin    *pinnedService
	step   *core.Step
	res    steps.ServiceResult
	before string
	// prev is ACTIVE's record of the predecessor, captured before anything
	// is published (R14.1); nil on a first deployment.
	prev      *core.ActiveService
	predGrace time.Duration
	start     time.Time
	timer     phaseTimer
	// candidate state (R17).
	after     string
	startedAt time.Time
	binds     []core.BackendBind
	// replicas are the candidate's other instances (ServiceSpec.Replicas)
	// once every instance is ready.
	replicas []instanceRun
	// journalMu serializes the journal saves of instances created in
	// parallel.
	journalMu sync.Mutex
	// scaling: publish the serving generation with scaled as its replicas
	// (ActionScale, R69).
	scaling    bool
	scaled     []core.Instance
	oldStopped bool // the data step stopped the old generation: retire removes it
}

func (d *deployRun) pinnedFor(name string) *pinnedService {
	for _, p := range d.pinned {
		if p.spec.Name == name {
			return p
		}
	}
	return nil
}

func (s *serviceRun) progress(phase steps.Phase, detail string, attempt int) {
	done := phase == "done" || phase == "failed" || phase == "unchanged"
	s.d.e.Emit(steps.ProgressEvent{App: s.d.app, Service: s.ps.Service, Phase: phase, Detail: detail, Attempt: attempt,
		Elapsed: time.Since(s.start), Done: done})
}

// runService is SPEC R14 for one planned service. It returns an error only
// when the service failed (the op is then saved with the failure, R14.4).
func (d *deployRun) runService(ctx context.Context, ps PlannedService) error {
	e := d.e
	s := &serviceRun{d: d, ps: ps, pin: d.pinnedFor(ps.Service), start: time.Now()}
	s.step = d.step(steps.ServiceStepID(ps.Service, "replace"), ps.Service)
	s.timer = phaseTimer{step: s.step}
	spec := s.pin.spec
	if cur := d.active.Services[ps.Service]; cur != nil && cur.Container != "" {
		c := *cur
		s.prev, s.before = &c, c.Container
		s.predGrace = steps.EffectiveGrace(c.Spec.StopGrace)
	}
	s.step.Before, s.step.Service = s.before, ps.Service
	s.step.StartedAt = e.Now()
	s.step.UpdatedAt = s.step.StartedAt
	s.res = steps.ServiceResult{Service: ps.Service, Before: s.before, SingleWriter: spec.SingleWriter()}

	switch ps.Action {
	case ActionUnchanged:
		return s.unchanged(ctx)
	case ActionOverlap:
		s.res.Flow = steps.FlowOverlap
		return s.overlap(ctx)
	case ActionScale:
		return s.scaleInPlace(ctx)
	case ActionRunOnce:
		return s.runOnce(ctx)
	default:
		s.res.Flow = steps.FlowSequential
		return s.sequential(ctx)
	}
}

// fail is R14.4: step failed with an error naming the service, step id and
// cause (ErrConflict), diagnostics copied, outcome and warnings recomputed,
// journal saved; the error is returned.
func (s *serviceRun) fail(ctx context.Context, cause error, diagnostics []string) error {
	d := s.d
	err := fmt.Errorf("deploy %s: service %s: step %s: %w", d.app, s.ps.Service, s.step.ID, classOf(ctx, cause))
	s.res.Result = steps.ResultFailed
	s.res.Error = err.Error()
	s.res.Diagnostics = diagnostics
	if s.after != "" {
		s.res.After = s.after
		s.step.After = s.after
	}
	s.step.State, s.step.Error, s.step.Diagnostics, s.step.UpdatedAt = core.StepFailed, err.Error(), diagnostics, d.e.Now()
	d.results = append(d.results, s.res)
	d.op.Outcome = steps.Outcome(d.results, false)
	d.op.Warnings = steps.Warnings(d.results, d.appWarnings)
	d.op.FinishedAt = d.e.Now()
	d.save(ctx)
	s.progress(steps.PhaseFailed, cause.Error(), 0)
	return err
}

// succeed is R14.8.
func (s *serviceRun) succeed(ctx context.Context, detail string) error {
	d := s.d
	if s.res.Result == "" {
		s.res.Result = steps.ResultDeployed
	}
	s.step.State, s.step.Error, s.step.UpdatedAt = core.StepSucceeded, "", d.e.Now()
	s.step.After, s.step.Result = s.res.After, string(s.res.Result)
	if detail != "" {
		s.step.Detail = detail
	}
	d.results = append(d.results, s.res)
	d.save(ctx)
	phase := steps.PhaseDone
	if s.res.Result == steps.ResultUnchanged {
		phase = steps.PhaseUnchanged
	}
	s.progress(phase, s.res.After, 0)
	return nil
}

func (s *serviceRun) warn(ws ...core.Warning) {
	for _, w := range ws {
		if w.Service == "" {
			w.Service = s.ps.Service
		}
		s.res.Warnings = append(s.res.Warnings, w)
	}
}

// unchanged is R15: keep the container, still publish and route
// (activation metadata preserved), record no execution, retire nothing.
func (s *serviceRun) unchanged(ctx context.Context) error {
	s.res.Result, s.res.Flow = steps.ResultUnchanged, steps.FlowUnchanged
	s.res.After = s.before
	steps.ActiveEndpoints(s.prev).Clone().SetOnResult(&s.res)
	s.after = s.before
	s.step.After = s.before
	if err := s.publishAndRoute(ctx, true); err != nil {
		return s.fail(ctx, err, nil)
	}
	return s.succeed(ctx, "unchanged: already running "+s.prev.Running())
}

// overlap is R18 followed by R14 steps 5–8 and R22.
func (s *serviceRun) overlap(ctx context.Context) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	// 1. Re-resolve binds and devices against current policy.
	if _, err := e.ResolveBinds(s.d.checks, s.d.app, s.pin.spec); err != nil {
		return s.fail(ctx, err, nil)
	}
	// 2. A pending withdrawal is retried before any candidate exists.
	if pending, err := e.HasPendingWithdrawal(ctx, app, name); err != nil {
		return s.fail(ctx, err, nil)
	} else if pending {
		if err := e.RetryPendingWithdrawals(ctx, app, name); err != nil {
			return s.fail(ctx, err, nil)
		}
	}
	// 4. Candidate creation, then the before_switch hook (R72).
	if err, diags := s.createCandidate(ctx); err != nil {
		return s.fail(ctx, err, diags)
	}
	if err, diags := s.beforeSwitch(ctx); err != nil {
		return s.failCandidate(ctx, err, diags)
	}
	// 5. retirement-pending for Before, with the predecessor's grace.
	// Every instance of the predecessor gets one: each is retired on its
	// own once the successor is verified (R43).
	for _, old := range s.prev.Instances() {
		m := core.Marker{App: app, Service: name, Container: old.Container, Reason: core.MarkerRetirementPending,
			Operation: s.d.op.ID, CreatedAt: e.Now(), StopGrace: core.Duration(s.predGrace), StopSignal: s.prev.StopSignal}
		if err := e.Store.SaveMarker(ctx, m); err != nil {
			s.dropCandidate(ctx, s.after)
			for _, r := range s.replicas {
				s.dropInstance(ctx, r)
			}
			return s.fail(ctx, fmt.Errorf("save retirement-pending marker for %s: %w", old.Container, err), nil)
		}
	}
	// R14.5 publish and route.
	if err := s.publishAndRoute(ctx, false); err != nil {
		s.warn(core.Warning{Service: name, Leftover: s.before, Detail: "superseded container kept running: the new generation " +
			s.after + " was not confirmed as published and routed (" + err.Error() + ")"})
		return s.fail(ctx, err, nil)
	}
	// R14.6 verified execution, then the after_switch hook (R72).
	s.recordExecution(ctx)
	if s.monitored() {
		// R76: the old generation waits stopped while the new one is watched.
		return s.watch(ctx)
	}
	s.afterSwitch(ctx)
	// R14.7 / R22 post-switch retirement, drain first (decision 16).
	s.retireSuperseded(ctx)
	return s.succeed(ctx, "")
}

// retireSuperseded is R22 with decision 16's drain for every instance of
// the predecessor (retireInstances).
func (s *serviceRun) retireSuperseded(ctx context.Context) {
	s.retireInstances(ctx, s.prev.Instances())
}

// backendAddrs lists the addresses the edge routes to prev's instances
// (SPEC R18).
func backendAddrs(prev *core.ActiveService) []string { return backendAddrsOf(prev.Instances()) }

// backendAddrsOf lists the addresses the edge routes to ins (SPEC R18).
func backendAddrsOf(ins []core.Instance) []string {
	var out []string
	for _, in := range ins {
		for _, port := range slices.Sorted(maps.Keys(in.BackendBinds)) {
			out = append(out, in.Addr(in.BackendBinds[port]))
		}
	}
	return out
}

// sequential is R19 followed by R14 steps 5–8.
func (s *serviceRun) sequential(ctx context.Context) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	spec := s.pin.spec
	// 1. Re-resolve binds and devices.
	if _, err := e.ResolveBinds(s.d.checks, app, spec); err != nil {
		return s.fail(ctx, err, nil)
	}
	if s.before != "" {
		// 2. Withdraw and require confirmation. A single-writer service is
		// held meanwhile (R58): the edge keeps its hosts and TCP ports and
		// holds their traffic until the successor is routed (publishAndRoute
		// writes a record without hold) or, on failure, endHold.
		t := time.Now()
		var hold time.Time
		if spec.SingleWriter() {
			hold = e.Now().Add(steps.HoldBound(spec, s.predGrace))
			defer func() {
				if s.res.Result == steps.ResultFailed {
					e.EndHold(context.WithoutCancel(ctx), app, name)
				}
			}()
		}
		if err := e.WithdrawHold(ctx, app, name, hold); err != nil {
			return s.fail(ctx, fmt.Errorf("withdraw %s: %w", s.before, err), nil)
		}
		s.timer.done("withdraw", t)
		// 3. replacement-pending for a single-writer new spec.
		if spec.SingleWriter() {
			m := core.Marker{App: app, Service: name, Container: s.before, Reason: core.MarkerReplacementPending,
				Operation: s.d.op.ID, CreatedAt: e.Now(), StopGrace: core.Duration(s.predGrace), StopSignal: s.prev.StopSignal}
			if err := e.Store.SaveMarker(ctx, m); err != nil {
				return s.fail(ctx, fmt.Errorf("save replacement-pending marker for %s: %w", s.before, err), nil)
			}
		}
		// 4. Retire Before with its grace, keeping its marker; a watched
		// service only stops it: it is the standby (R76.8).
		if take, restore := s.dataPlan(); take || restore != "" {
			if err := s.preserveData(ctx, take, restore); err != nil {
				return err
			}
		}
		retire := s.retirePredecessor
		if s.monitored() {
			retire = s.stopPredecessor
			if s.oldStopped {
				retire = func(context.Context) error { return nil }
			}
		}
		if err := retire(ctx); err != nil {
			return s.fail(ctx, err, nil)
		}
	}
	// 5. Candidate creation, then the before_switch hook (R72) before the
	// hold is released to it.
	if err, diags := s.createCandidate(ctx); err != nil {
		return s.fail(ctx, err, diags)
	}
	if err, diags := s.beforeSwitch(ctx); err != nil {
		return s.failCandidate(ctx, err, diags)
	}
	if err := s.publishAndRoute(ctx, false); err != nil {
		return s.fail(ctx, err, nil)
	}
	s.recordExecution(ctx)
	if s.monitored() {
		return s.watch(ctx) // R76.8
	}
	s.afterSwitch(ctx)
	return s.succeed(ctx, "")
}

// retirePredecessor is R19.4: retire Before with its grace, keeping its
// marker, then its replicas (stateless: no marker). An error names the
// container not confirmed gone.
func (s *serviceRun) retirePredecessor(ctx context.Context) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	t := time.Now()
	s.progress(steps.PhaseRetire, s.before, 0)
	o := steps.PreStopOf(app, s.prev)
	if s.oldStopped {
		o = steps.RetireOptions{Force: true} // stopped already: remove it
	}
	o.Service, o.Grace = name, s.predGrace
	r := e.Retire(ctx, app, s.before, o)
	s.timer.done("retire", t)
	s.warn(r.Warnings...)
	if !r.Gone {
		return fmt.Errorf("superseded container %s not confirmed gone: %w", s.before, r.Err(s.before))
	}
	for _, id := range s.prev.ReplicaIDs() {
		r := e.Retire(ctx, app, id, o)
		s.warn(r.Warnings...)
		if !r.Gone {
			return fmt.Errorf("superseded container %s not confirmed gone: %w", id, r.Err(id))
		}
	}
	return nil
}

// publishAndRoute is SPEC R21. (a) reload ACTIVE, write the service record
// (activation kept when unchanged), dpConverged/networks, save; ownership;
// for a sequential replacement clear Before's marker. (b) re-withdraw
// pending withdrawals of the app, then rebuild.
func (s *serviceRun) publishAndRoute(ctx context.Context, unchanged bool) error {
	d, e, app, name := s.d, s.d.e, s.d.app, s.ps.Service
	spec := s.pin.spec
	t := time.Now()
	if s.res.Flow != steps.FlowUnchanged {
		// An unchanged service is re-routed as it is: nothing switches.
		s.progress(steps.PhaseSwitch, s.after, 0)
	}
	defer func() { s.timer.done("switch", t) }()
	active, err := e.LoadActive(ctx, app)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	rec := &core.ActiveService{
		EffectiveRevision: d.rev.ID, ActivatedBy: d.op.ID, ActivatedAt: e.Now(),
		Image: s.pin.img.Ref, Digest: s.pin.img.Digest, Container: s.after, Spec: *spec,
		StopSignal: steps.EffectiveStopSignal(spec, s.pin.img),
	}
	if unchanged && s.prev != nil {
		rec.StopSignal = s.prev.StopSignal
		rec.ActivatedBy, rec.ActivatedAt = s.prev.ActivatedBy, s.prev.ActivatedAt
		rec.Image, rec.Digest = s.prev.Image, s.prev.Digest
		steps.ActiveEndpoints(s.prev).Clone().SetOn(rec)
		rec.Replicas = steps.CloneInstances(s.prev.Replicas)
		if cur := active.Services[name]; cur != nil && cur.Container == s.after {
			// Keep what ACTIVE holds now (binds may have been refreshed).
			steps.ActiveEndpoints(cur).Clone().SetOn(rec)
			rec.Replicas = steps.CloneInstances(cur.Replicas)
		}
		if s.scaling {
			rec.Replicas = steps.CloneInstances(s.scaled)
		}
	} else {
		steps.EndpointsOf(s.binds).SetOn(rec)
		for _, r := range s.replicas {
			rec.Replicas = append(rec.Replicas, steps.EndpointsOf(r.binds).Instance(r.id))
		}
	}
	active.Services[name] = rec
	active.Converged = dpConverged(active, d.rev)
	if active.Converged {
		active.ConvergedRevision = d.rev.ID
		active.Networks = append([]string(nil), d.rev.Spec.Networks...)
	}
	if err := e.Store.SaveActive(ctx, active); err != nil {
		return fmt.Errorf("publish ACTIVE: %w", err)
	}
	d.active = active
	if err := s.saveOwnership(ctx); err != nil {
		return fmt.Errorf("publish: record ownership: %w", err)
	}
	if !unchanged && s.res.Flow == steps.FlowSequential && s.before != "" && s.before != s.after {
		if s.monitored() {
			s.markStandby(ctx) // R76.8: retirement-pending replaces replacement-pending
		} else if err := e.Store.ClearMarker(ctx, app, name, s.before); err != nil {
			s.warn(core.Warning{Service: name, Leftover: s.before, Detail: "clear recovery inhibition: " + err.Error()})
		}
	}
	if err := e.RetryPendingWithdrawals(ctx, app); err != nil {
		return fmt.Errorf("route: %w", err)
	}
	if err := e.Rebuild(ctx); err != nil {
		return fmt.Errorf("route: %w", err)
	}
	return nil
}

// dpConverged reports whether every service rev declares is published at
// rev (R21a).
func dpConverged(a core.Active, rev core.Revision) bool {
	for _, s := range rev.Spec.Services {
		if s.Run == core.RunOnce {
			continue // never published
		}
		cur := a.Services[s.Name]
		if cur == nil || cur.EffectiveRevision != rev.ID || cur.Container == "" {
			return false
		}
	}
	return true
}

// saveOwnership records what the incarnation owns (SPEC 1.2 [C]).
func (s *serviceRun) saveOwnership(ctx context.Context) error {
	d, e, app := s.d, s.d.e, s.d.app
	spec := s.pin.spec
	o, err := e.Store.LoadOwnership(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		o, err = core.Ownership{App: app, Incarnation: d.info.Incarnation}, nil
	}
	if err != nil {
		return err
	}
	if o.Incarnation == "" {
		o.Incarnation = d.info.Incarnation
	}
	o.Networks = dpAddUnique(o.Networks, steps.NetworkName(app))
	for _, v := range spec.Volumes {
		o.Volumes = dpAddUnique(o.Volumes, steps.VolumeName(app, v.Name))
	}
	for _, sec := range spec.Secrets {
		o.Secrets = dpAddUnique(o.Secrets, spec.Name+"/"+sec.Name)
	}
	if s.pin.img.Digest != "" {
		o.Images = dpAddUnique(o.Images, s.pin.img.Digest)
	}
	if o.SingleWriter == nil {
		o.SingleWriter = map[string]bool{}
	}
	o.SingleWriter[spec.Name] = spec.SingleWriter()
	return e.Store.SaveOwnership(ctx, o)
}

// recordExecution records the verified execution (R37): only after routing
// accepted it, never for a zero start time. A failure is only logged.
func (s *serviceRun) recordExecution(ctx context.Context) {
	e, app := s.d.e, s.d.app
	if s.after == "" || s.startedAt.IsZero() {
		return
	}
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err == nil {
		if rec.Verified == nil {
			rec.Verified = map[string]core.VerifiedExecution{}
		}
		rec.Verified[s.ps.Service] = core.VerifiedExecution{Container: s.after, StartedAt: s.startedAt}
		err = e.Store.SaveRecovery(ctx, app, rec)
	}
	if err != nil {
		e.Log().Warn("record verified execution", "app", app, "service", s.ps.Service, "container", s.after, "error", err)
	}
}

// dropService is R56 for a full deploy: withdraw, persist a `removed`
// marker, retire (grace, clear-marker), delete from ACTIVE, save. Any
// failure fails the deploy before anything new is published.
func (d *deployRun) dropService(ctx context.Context, ps PlannedService) error {
	e, app, name := d.e, d.app, ps.Service
	s := &serviceRun{d: d, ps: ps, start: time.Now(), before: ps.Before}
	s.step = d.step(steps.ServiceStepID(name, "remove"), name)
	s.step.Before = ps.Before
	s.res = steps.ServiceResult{Service: name, Before: ps.Before}
	cur := d.active.Services[name]
	grace := steps.DefaultStopGrace
	if cur != nil {
		grace = steps.EffectiveGrace(cur.Spec.StopGrace)
	}
	if err := e.Withdraw(ctx, app, name); err != nil {
		return s.fail(ctx, err, nil)
	}
	if ps.Before != "" {
		m := core.Marker{App: app, Service: name, Container: ps.Before, Reason: core.MarkerRemoved, Operation: d.op.ID, CreatedAt: e.Now()}
		if err := e.Store.SaveMarker(ctx, m); err != nil {
			return s.fail(ctx, fmt.Errorf("save removed marker for %s: %w", ps.Before, err), nil)
		}
		for _, id := range append(cur.ReplicaIDs(), ps.Before) {
			r := e.Retire(ctx, app, id, steps.RetireOptions{Service: name, Grace: grace, ClearMarker: true})
			s.warn(r.Warnings...)
			if !r.Gone {
				return s.fail(ctx, fmt.Errorf("container %s not confirmed gone: %w", id, r.Err(id)), nil)
			}
		}
	}
	active, err := e.LoadActive(ctx, app)
	if err != nil {
		return s.fail(ctx, err, nil)
	}
	delete(active.Services, name)
	if err := e.Store.SaveActive(ctx, active); err != nil {
		return s.fail(ctx, fmt.Errorf("save ACTIVE: %w", err), nil)
	}
	d.active = active
	s.res.Result = steps.ResultRemoved
	s.step.State, s.step.UpdatedAt, s.step.Result = core.StepSucceeded, e.Now(), string(steps.ResultRemoved)
	s.step.Detail = "removed: no longer declared"
	d.results = append(d.results, s.res)
	d.save(ctx)
	s.progress(steps.PhaseDone, "removed", 0)
	return nil
}

// dpAddUnique appends v to list unless it is already there.
func dpAddUnique(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// phaseTimer records elapsed phase durations on a step.
type phaseTimer struct {
	step *core.Step
}

func (p *phaseTimer) done(phase string, since time.Time) time.Duration {
	d := time.Since(since)
	if p.step != nil {
		if p.step.Phases == nil {
			p.step.Phases = map[string]core.Duration{}
		}
		p.step.Phases[phase] += core.Duration(d)
	}
	return d
}
