package deploy

import (
	"context"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// R76.8: the monitor for a sequential (single-writer, device or UDP)
// replacement. The forward flow is R19 with one change: the old generation
// is stopped, not removed, before the new one is created (its
// replacement-pending marker kept), and at publication that marker becomes
// retirement-pending, as the overlap flow's standby has. A breach then
// runs rollBackSequential, which never lets two generations of the service
// run at once.

// stopPredecessor is R19.4 for a watched service: run Before's pre_stop
// hooks and stop every instance of the old generation with its own grace
// (and the signal fixed on it), keeping Before's marker. Nothing is
// removed. An error names the instance not confirmed stopped: the new
// generation is then not created.
func (s *serviceRun) stopPredecessor(ctx context.Context) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	t := time.Now()
	defer func() { s.timer.done("stop", t) }()
	o := steps.PreStopOf(app, s.prev)
	o.Service = name
	for _, old := range s.prev.Instances() {
		s.warn(e.PreStop(ctx, app, old.Container, o)...)
		s.progress(steps.PhaseStop, old.Container, 0)
		if err := e.Runtime.StopContainer(ctx, old.Container, s.predGrace); err != nil {
			return fmt.Errorf("superseded container %s not confirmed stopped: %w", old.Container, err)
		}
	}
	return nil
}

// markStandby gives every instance of the stopped old generation a
// retirement-pending marker (replacing Before's replacement-pending one)
// once the new generation is published: a crash in the window then retires
// the standby (R43) and keeps what ACTIVE names. A failed save is a
// warning (the deploy itself retires or restores the standby).
func (s *serviceRun) markStandby(ctx context.Context) {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	for _, old := range s.prev.Instances() {
		m := core.Marker{App: app, Service: name, Container: old.Container, Reason: core.MarkerRetirementPending,
			Operation: s.d.op.ID, CreatedAt: e.Now(), StopGrace: core.Duration(s.predGrace), StopSignal: s.prev.StopSignal}
		if err := e.Store.SaveMarker(ctx, m); err != nil {
			s.warn(core.Warning{Service: name, Leftover: old.Container, Detail: "save the standby's retirement-pending marker: " + err.Error()})
		}
	}
}

// rollBackSequential is R76.8's automatic rollback: hold the service's
// traffic (R58, single-writer services), give the new generation
// retirement-pending markers and stop it with its own grace and signal,
// name the stopped standby in ACTIVE (still held), remove the new
// generation, then start the standby, probe its readiness, publish its
// fresh binds and route it (which ends the hold). At no moment do two
// generations run. A crash at any point leaves ACTIVE naming one
// generation and the other stopped with a marker, which reconcile removes.
func (s *serviceRun) rollBackSequential(ctx context.Context, reason string, rb *core.AutoRollback) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	ctx = context.WithoutCancel(ctx) // a rollback, once begun, is finished
	st := s.d.op.Step(MonitorStepID(name))
	st.Detail = "automatic rollback: " + reason
	s.d.save(ctx)
	s.progress(PhaseMonitor, "rolling back: "+reason, 0)
	newGen := *s.d.active.Services[name]
	newGen.Replicas = steps.CloneInstances(newGen.Replicas)
	stopped, err := s.stopNewGeneration(ctx, &newGen)
	if err != nil {
		return s.rollbackNotStarted(ctx, reason, &newGen, stopped, err)
	}
	// ACTIVE names the standby (stopped, held) before the new one goes.
	held := *s.prev
	held.Replicas = nil
	for _, id := range s.prev.ReplicaIDs() {
		held.Replicas = append(held.Replicas, core.Instance{Container: id})
	}
	held.BackendBinds, held.UDPBackendBinds, held.IP, held.Network = nil, nil, "", ""
	held.HoldUntil = s.d.active.Services[name].HoldUntil
	if err := s.saveServiceRecord(ctx, &held); err != nil {
		return s.rollbackNotStarted(ctx, reason, &newGen, stopped, err)
	}
	for _, in := range s.prev.Instances() {
		if err := e.Store.ClearMarker(ctx, app, name, in.Container); err != nil {
			s.warn(core.Warning{Service: name, Leftover: in.Container, Detail: "clear recovery inhibition: " + err.Error()})
		}
	}
	grace := steps.EffectiveGrace(s.pin.spec.StopGrace)
	for _, in := range newGen.Instances() {
		s.progress(steps.PhaseRetire, in.Container, 0)
		r := e.Retire(ctx, app, in.Container, steps.RetireOptions{Service: name, Grace: grace, ClearMarker: true, RetryOnLeak: true})
		s.warn(r.Warnings...)
	}
	rec, err := s.restartStandby(ctx)
	if err == nil {
		rec.HoldUntil = nil
		if err = s.saveServiceRecord(ctx, rec); err == nil {
			err = e.Rebuild(ctx)
		}
	}
	if err != nil {
		return s.standbyLost(ctx, reason, err)
	}
	rb.Succeeded = true
	st = s.d.op.Step(MonitorStepID(name))
	st.State, st.Result, st.UpdatedAt = core.StepSucceeded, MonitorRolledBack, e.Now()
	st.Detail = fmt.Sprintf("automatic rollback: %s; %s serves again", reason, readiness.ShortID(s.before))
	s.d.save(ctx)
	msg := fmt.Sprintf("automatic rollback of service %s: %s within the %s monitor window; the previous generation %s (revision %s) serves again",
		name, reason, s.pin.spec.Monitor.Window.D(), readiness.ShortID(s.before), s.prev.EffectiveRevision)
	if s.pin.spec.SingleWriter() {
		s.warn(core.Warning{Service: name, Detail: dataNotRolledBack})
		msg += "; " + dataNotRolledBack
	}
	s.after, s.res.After, s.step.After = "", "", "" // retired: the result names no new generation
	return s.fail(ctx, fmt.Errorf("%w: %s", core.ErrConflict, msg), nil)
}

// dataNotRolledBack is R76.8's notice on a single-writer service's
// rollback.
const dataNotRolledBack = "the rollback restored the code, not the data: what the new generation wrote to its volumes and binds stays"

// stopNewGeneration withdraws newGen (held until the standby is routed,
// for a single-writer service), gives its instances retirement-pending
// markers and stops them (pre_stop hooks, the new spec's grace). It
// returns the instances it stopped; an error means an instance may still
// run: the standby must not start.
func (s *serviceRun) stopNewGeneration(ctx context.Context, newGen *core.ActiveService) (stopped []string, err error) {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	spec := s.pin.spec
	grace := steps.EffectiveGrace(spec.StopGrace)
	var hold time.Time
	if spec.SingleWriter() {
		hold = e.Now().Add(steps.HoldBound(&s.prev.Spec, grace))
	}
	if err := e.WithdrawHold(ctx, app, name, hold); err != nil {
		return nil, fmt.Errorf("withdraw %s: %w", readiness.ShortID(s.after), err)
	}
	if a, err := e.LoadActive(ctx, app); err == nil {
		s.d.active = a
	}
	o := steps.PreStopOf(app, newGen)
	o.Service = name
	for _, in := range newGen.Instances() {
		m := core.Marker{App: app, Service: name, Container: in.Container, Reason: core.MarkerRetirementPending,
			Operation: s.d.op.ID, CreatedAt: e.Now(), StopGrace: spec.StopGrace, StopSignal: newGen.StopSignal}
		if err := e.Store.SaveMarker(ctx, m); err != nil {
			return stopped, fmt.Errorf("save retirement-pending marker for %s: %w", in.Container, err)
		}
		s.warn(e.PreStop(ctx, app, in.Container, o)...)
		s.progress(steps.PhaseStop, in.Container, 0)
		if err := e.Runtime.StopContainer(ctx, in.Container, grace); err != nil {
			return stopped, fmt.Errorf("stop %s: %w", readiness.ShortID(in.Container), err)
		}
		stopped = append(stopped, in.Container)
	}
	return stopped, nil
}

// saveServiceRecord writes rec as the service's ACTIVE record (not
// converged: the deploy's revision no longer serves it).
func (s *serviceRun) saveServiceRecord(ctx context.Context, rec *core.ActiveService) error {
	e := s.d.e
	active, err := e.LoadActive(ctx, s.d.app)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	active.Services[s.ps.Service] = rec
	active.Converged = false
	if err := e.Store.SaveActive(ctx, active); err != nil {
		return fmt.Errorf("publish ACTIVE: %w", err)
	}
	s.d.active = active
	return nil
}

// rollbackNotStarted is R76.5 when the new generation could not be
// withdrawn or stopped, or the standby not named in ACTIVE: the standby is
// never started beside it. The instances already stopped are started
// again, the new generation's markers cleared, it is published and routed
// again (ending the hold), the standby retired, and the error says the
// new generation still serves.
func (s *serviceRun) rollbackNotStarted(ctx context.Context, reason string, newGen *core.ActiveService, stopped []string, cause error) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	st := s.d.op.Step(MonitorStepID(name))
	st.State, st.Error, st.UpdatedAt = core.StepFailed, cause.Error(), e.Now()
	s.d.save(ctx)
	for _, id := range stopped {
		if err := e.Runtime.StartContainer(ctx, id); err != nil {
			s.warn(core.Warning{Service: name, Leftover: id, Detail: "start the new generation again: " + err.Error()})
		}
	}
	for _, in := range newGen.Instances() {
		if err := e.Store.ClearMarker(ctx, app, name, in.Container); err != nil {
			s.warn(core.Warning{Service: name, Leftover: in.Container, Detail: "clear recovery inhibition: " + err.Error()})
		}
	}
	if err := s.publishAndRoute(ctx, false); err != nil {
		s.warn(core.Warning{Service: name, Detail: "route the new generation again: " + err.Error()})
	}
	s.retireStandby(ctx)
	return s.fail(ctx, fmt.Errorf("%w: %s, and the automatic rollback failed before the standby was started: %v; the new generation %s still serves",
		core.ErrConflict, reason, cause, readiness.ShortID(s.after)), nil)
}

// standbyLost is R76.5 for a sequential service: the new generation is
// already gone (it was removed first: one writer at a time) and the
// standby did not start, was not ready, or could not be routed. ACTIVE
// keeps naming the standby, so reconcile converges by starting it (or
// rebuilding it from its revision) and never brings back the generation
// that breached; the hold ends (held requests get 503 at once).
func (s *serviceRun) standbyLost(ctx context.Context, reason string, cause error) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	e.EndHold(ctx, app, name)
	st := s.d.op.Step(MonitorStepID(name))
	st.State, st.Error, st.UpdatedAt = core.StepFailed, cause.Error(), e.Now()
	s.d.save(ctx)
	return s.fail(ctx, fmt.Errorf("%w: %s, and the automatic rollback failed: %v. The new generation %s was already removed (a single-writer service never runs two generations at once), so service %s has no serving generation now: ACTIVE names the previous generation %s (revision %s); run `docker gordon reconcile %s` to start or rebuild it, or deploy again",
		core.ErrConflict, reason, cause, readiness.ShortID(s.after), name, readiness.ShortID(s.before), s.prev.EffectiveRevision, app), nil)
}
