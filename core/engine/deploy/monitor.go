package deploy

import (
	"context"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// PhaseMonitor is the progress phase of R76's post-switch watch: its
// Detail is "<left> left: <requests> requests, <errors> errors".
const PhaseMonitor steps.Phase = "monitor"

// DefaultMonitorTick is how often the monitor reads the edge's counts.
const DefaultMonitorTick = time.Second

// Results of the monitor step (SPEC R76).
const (
	MonitorKept       = "kept"
	MonitorRolledBack = "rolled-back (automatic)"
)

// MonitorStepID is the journal step id of service's monitor window:
// "service.<service>.monitor".
func MonitorStepID(service string) string { return steps.ServiceStepID(service, "monitor") }

// The monitor (SPEC R76, core.Monitor): for Window after the switch the
// deploy keeps the old generation stopped (not removed) as a standby and
// reads the edge's cumulative request and error counts of the new
// generation's backends each MonitorTick. With at least MinRequests
// requests seen and an error share above MaxErrorRate, the service is
// rolled back to the standby (an automatic rollback); at the window's end
// the standby is retired. An overlap replacement stops the old generation
// after the switch (standby); a sequential one (R76.8) stops it instead of
// removing it before the new one starts, and on a breach removes the new
// generation before it starts the standby again (one writer at a time).

// monitored reports whether this replacement is watched (R76): the new spec
// declares a monitor and a previous generation exists to keep as the
// standby.
func (s *serviceRun) monitored() bool {
	return s.pin.spec.Monitor != nil && len(s.prev.Instances()) > 0
}

// watch is R76 after the switch: the after_switch hook (a failure counts
// as a breach and is reported by the rollback, not as a hook failure), then
// the window (monitorAndFinish).
func (s *serviceRun) watch(ctx context.Context) error {
	base, failed := s.monitorBaseline(ctx), len(s.d.hookFailures)
	s.afterSwitch(ctx)
	hookFailed := len(s.d.hookFailures) > failed
	s.d.hookFailures = s.d.hookFailures[:failed] // the rollback reports it
	return s.monitorAndFinish(ctx, base, hookFailed)
}

// counts sums the cumulative request and error counts the edge reports for
// addrs (zero for an address it does not report).
func (e *Engine) counts(ctx context.Context, addrs []string) (requests, errs int64, err error) {
	st, err := e.Traffic.Status(ctx)
	if err != nil {
		return 0, 0, err
	}
	want := map[string]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	for _, b := range st.Backends {
		if want[b.Addr] {
			requests += b.Requests
			errs += b.Errors
		}
	}
	return requests, errs, nil
}

// monitorBaseline reads the new generation's counts right after the switch
// (zero when the edge cannot tell: the edge counts from its first request).
func (s *serviceRun) monitorBaseline(ctx context.Context) [2]int64 {
	r, x, err := s.d.e.counts(ctx, backendAddrs(s.d.active.Services[s.ps.Service]))
	if err != nil {
		return [2]int64{}
	}
	return [2]int64{r, x}
}

// monitorAndFinish is R76 after the switch and the after_switch hook: drain
// the old generation and stop it (the standby, its retirement-pending
// markers kept so a crash retires it), then watch the new generation for
// the window. On a breach, or when after_switch failed (hookFailed), the
// service is rolled back to the standby and the step fails with the
// measured rate; else the standby is retired and the step succeeds.
func (s *serviceRun) monitorAndFinish(ctx context.Context, base [2]int64, hookFailed bool) error {
	e, name := s.d.e, s.ps.Service
	m := s.pin.spec.Monitor
	if s.res.Flow != steps.FlowSequential {
		s.standby(ctx) // a sequential replacement stopped it before the new one started
	}
	st := s.addStep(MonitorStepID(name))
	st.Before, st.After = s.before, s.after
	st.StartedAt, st.UpdatedAt = e.Now(), e.Now()
	st.Detail = fmt.Sprintf("watching %s for %s: max error rate %s, min %d requests; standby %s stopped",
		readiness.ShortID(s.after), m.Window.D(), pct(m.MaxErrorRate), m.MinRequests, readiness.ShortID(s.before))
	s.d.save(ctx)
	newAddrs := backendAddrs(s.d.active.Services[name])
	var req, errs int64
	reason := ""
	if hookFailed {
		reason = "the after_switch hook failed"
	}
	tick := e.MonitorTick
	if tick <= 0 {
		tick = DefaultMonitorTick
	}
	t0 := time.Now()
	deadline := t0.Add(m.Window.D())
	for reason == "" && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
			continue
		case <-time.After(min(tick, time.Until(deadline))):
		}
		r, x, err := e.counts(ctx, newAddrs)
		if err != nil {
			e.Log().Warn("monitor: read edge counts", "app", s.d.app, "service", name, "error", err)
			continue
		}
		req, errs = max(r-base[0], 0), max(x-base[1], 0)
		s.progress(PhaseMonitor, fmt.Sprintf("%s left: %d requests, %d errors", time.Until(deadline).Round(time.Second), req, errs), 0)
		if breached(m, req, errs) {
			reason = fmt.Sprintf("error rate %s (%d of %d requests) exceeded max_error_rate %s",
				pct(float64(errs)/float64(req)), errs, req, pct(m.MaxErrorRate))
		}
	}
	s.timer.done("monitor", t0)
	st = s.d.op.Step(MonitorStepID(name))
	st.UpdatedAt = e.Now()
	if reason == "" {
		st.State, st.Result = core.StepSucceeded, MonitorKept
		st.Detail = fmt.Sprintf("kept %s: %d requests, %d errors in %s", readiness.ShortID(s.after), req, errs, time.Since(t0).Round(time.Second))
		s.d.save(ctx)
		s.retireStandby(context.WithoutCancel(ctx))
		return s.succeed(ctx, "")
	}
	rb := &core.AutoRollback{Reason: "error_rate", Flow: string(s.res.Flow), SingleWriter: s.pin.spec.SingleWriter(),
		Requests: req, Errors: errs, MaxErrorRate: m.MaxErrorRate, MinRequests: m.MinRequests, Window: m.Window,
		At: e.Now(), Replaced: s.after, Restored: s.before, RestoredRevision: s.prev.EffectiveRevision}
	if hookFailed {
		rb.Reason = "after_switch"
	}
	if req > 0 {
		rb.ErrorRate = float64(errs) / float64(req)
	}
	st.Rollback = rb
	if s.res.Flow == steps.FlowSequential {
		return s.rollBackSequential(ctx, reason, rb)
	}
	return s.rollBack(ctx, reason, rb)
}

// breached is R76's test: at least m.MinRequests requests (deltas since
// the switch) and errs/requests above m.MaxErrorRate.
func breached(m *core.Monitor, requests, errs int64) bool {
	if requests <= 0 || requests < m.MinRequests {
		return false
	}
	return float64(errs)/float64(requests) > m.MaxErrorRate
}

// pct writes a share as a percentage ("5%", "12.5%").
func pct(f float64) string { return fmt.Sprintf("%.3g%%", f*100) }

// standby is R76's first part: drain the old generation's backends (as
// retireSuperseded) and stop its instances with their grace, pre_stop
// hooks first; they stay (stopped, not removed) with their
// retirement-pending markers.
func (s *serviceRun) standby(ctx context.Context) {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	t := time.Now()
	limit := e.DrainLimit(s.predGrace)
	for _, addr := range backendAddrs(s.prev) {
		s.progress(steps.PhaseDrain, addr, 0)
		if _, err := e.WaitDrained(ctx, addr, limit); err != nil {
			break
		}
	}
	s.timer.done("drain", t)
	o := steps.PreStopOf(app, s.prev)
	o.Service = name
	for _, old := range s.prev.Instances() {
		s.warn(e.PreStop(ctx, app, old.Container, o)...)
		s.progress(steps.PhaseStop, old.Container, 0)
		if err := e.Runtime.StopContainer(ctx, old.Container, s.predGrace); err != nil {
			s.warn(core.Warning{Service: name, Leftover: old.Container, Detail: "stop standby: " + err.Error()})
		}
	}
}

// retireStandby removes the stopped old generation at the window's end
// (R22's retirement: clear-marker, retry-on-leak).
func (s *serviceRun) retireStandby(ctx context.Context) {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	t := time.Now()
	for _, old := range s.prev.Instances() {
		s.progress(steps.PhaseRetire, old.Container, 0)
		r := e.Retire(ctx, app, old.Container, steps.RetireOptions{Service: name, Grace: s.predGrace, ClearMarker: true, RetryOnLeak: true})
		s.warn(r.Warnings...)
		if !r.Gone && len(r.Warnings) == 0 {
			s.warn(core.Warning{Service: name, Leftover: old.Container, Detail: "superseded container not confirmed gone"})
		}
	}
	s.timer.done("retire", t)
}
