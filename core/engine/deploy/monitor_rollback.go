package deploy

import (
	"context"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// rollBack is R76's automatic rollback of one service to its standby:
// start the stopped old generation, read its binds and probe its declared
// readiness, publish it in ACTIVE again and route it, then drain and retire
// the new generation. The monitor step records the reason and the result;
// the service step fails with an error (ErrConflict) giving the measured
// rate. When the standby cannot be restored the new generation keeps
// serving and the error says so.
func (s *serviceRun) rollBack(ctx context.Context, reason string, rb *core.AutoRollback) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	ctx = context.WithoutCancel(ctx) // a rollback, once begun, is finished
	st := s.d.op.Step(MonitorStepID(name))
	st.Detail = "automatic rollback: " + reason
	s.d.save(ctx)
	s.progress(PhaseMonitor, "rolling back: "+reason, 0)
	rec, err := s.restartStandby(ctx)
	st = s.d.op.Step(MonitorStepID(name))
	st.UpdatedAt = e.Now()
	if err != nil {
		st.State, st.Error = core.StepFailed, err.Error()
		s.d.save(ctx)
		s.retireStandby(ctx)
		return s.fail(ctx, fmt.Errorf("%w: %s, and the automatic rollback failed: %v; the new generation %s still serves",
			core.ErrConflict, reason, err, readiness.ShortID(s.after)), nil)
	}
	newGen := s.d.active.Services[name]
	if err := s.publishStandby(ctx, rec); err != nil {
		st.State, st.Error = core.StepFailed, err.Error()
		s.d.save(ctx)
		return s.fail(ctx, fmt.Errorf("%w: %s, and the automatic rollback failed: %v", core.ErrConflict, reason, err), nil)
	}
	rb.Succeeded = true
	st = s.d.op.Step(MonitorStepID(name))
	st.State, st.Result = core.StepSucceeded, MonitorRolledBack
	st.Detail = fmt.Sprintf("automatic rollback: %s; %s serves again", reason, readiness.ShortID(s.before))
	s.d.save(ctx)
	// Drain and retire the new generation (its markers cleared).
	t := time.Now()
	grace := steps.EffectiveGrace(s.pin.spec.StopGrace)
	for _, addr := range backendAddrs(newGen) {
		s.progress(steps.PhaseDrain, addr, 0)
		if _, err := e.WaitDrained(ctx, addr, e.DrainLimit(grace)); err != nil {
			break
		}
	}
	s.timer.done("drain", t)
	for _, in := range newGen.Instances() {
		s.progress(steps.PhaseRetire, in.Container, 0)
		r := e.Retire(ctx, app, in.Container, steps.RetireOptions{Service: name, Grace: grace, ClearMarker: true, RetryOnLeak: true})
		s.warn(r.Warnings...)
	}
	s.after, s.res.After, s.step.After = "", "", "" // retired: the result names no new generation
	return s.fail(ctx, fmt.Errorf("%w: automatic rollback of service %s: %s within the %s monitor window; the previous generation %s (revision %s) serves again",
		core.ErrConflict, name, reason, s.pin.spec.Monitor.Window.D(), readiness.ShortID(s.before), s.prev.EffectiveRevision), nil)
}

// restartStandby starts every stopped instance of the old generation, reads
// its fresh binds (claims registered) and runs its declared readiness. It
// returns the old generation's ACTIVE record with the fresh endpoints.
func (s *serviceRun) restartStandby(ctx context.Context) (*core.ActiveService, error) {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	rec := *s.prev
	rec.Replicas = nil
	for i, in := range s.prev.Instances() {
		s.progress(steps.PhaseStart, in.Container, 0)
		if err := e.Runtime.StartContainer(ctx, in.Container); err != nil {
			return nil, fmt.Errorf("start %s: %w", readiness.ShortID(in.Container), err)
		}
		cs, err := e.Runtime.InspectContainer(ctx, in.Container)
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", readiness.ShortID(in.Container), err)
		}
		ep, err := e.ReadBinds(ctx, app, in.Container, &s.prev.Spec)
		if err != nil {
			return nil, err
		}
		if err := e.ProbeRunning(ctx, app, name, &s.prev.Spec, readiness.DeclaredReadiness(&s.prev.Spec), in.Container, cs.StartedAt, ep); err != nil {
			return nil, err
		}
		if i == 0 {
			ep.SetOn(&rec)
		} else {
			rec.Replicas = append(rec.Replicas, ep.Instance(in.Container))
		}
	}
	return &rec, nil
}

// publishStandby writes rec (the restarted old generation) into ACTIVE,
// turns the old generation's retirement-pending markers into ones for the
// new generation (so a crash from here retires the new one), and routes.
func (s *serviceRun) publishStandby(ctx context.Context, rec *core.ActiveService) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	active, err := e.LoadActive(ctx, app)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	newGen := active.Services[name]
	for _, in := range newGen.Instances() {
		m := core.Marker{App: app, Service: name, Container: in.Container, Reason: core.MarkerRetirementPending,
			Operation: s.d.op.ID, CreatedAt: e.Now(), StopGrace: s.pin.spec.StopGrace, StopSignal: newGen.StopSignal}
		if err := e.Store.SaveMarker(ctx, m); err != nil {
			return fmt.Errorf("save retirement-pending marker for %s: %w", in.Container, err)
		}
	}
	active.Services[name] = rec
	active.Converged = false
	if err := e.Store.SaveActive(ctx, active); err != nil {
		return fmt.Errorf("publish ACTIVE: %w", err)
	}
	s.d.active = active
	for _, in := range rec.Instances() {
		if err := e.Store.ClearMarker(ctx, app, name, in.Container); err != nil {
			s.warn(core.Warning{Service: name, Leftover: in.Container, Detail: "clear recovery inhibition: " + err.Error()})
		}
	}
	if err := e.Rebuild(ctx); err != nil {
		return fmt.Errorf("route: %w", err)
	}
	return nil
}
