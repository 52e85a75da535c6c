package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// crashLoopWaits are the waits after the free attempts (§4: 1, 2, 4, 8,
// 15 min cap).
var crashLoopWaits = []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute}

// recoverService is R41 for one service. It returns the verified start
// time and true only when step 7 succeeded in this pass (R41.8).
//
// One departure from R41.4, for zero downtime: when the service still has a
// retirement-pending predecessor (an overlap switch that a crash cut short,
// so the edge may still route the predecessor), a fresh but running
// execution is verified BEFORE any withdrawal. Withdrawing first would leave
// the host with no route for the whole verification (seen: 0.6 s of 404s
// under load). The unverified binds are still never published: routing
// changes only after verification succeeds, and a failed verification
// withdraws as R41.7 says.
func (e *Engine) recoverService(ctx context.Context, app, name string, blocking map[string]core.Marker, overlapping bool, rep *ReconcileReport) (time.Time, bool, error) {
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		return time.Time{}, false, err
	}
	as := active.Services[name]
	if as == nil || as.Container == "" { // R41.1
		return time.Time{}, false, nil
	}
	id := as.Container
	if m, ok := blocking[id]; ok { // R41.2
		werr := e.WithdrawPrimary(ctx, app, name, time.Time{})
		return time.Time{}, false, errors.Join(fmt.Errorf("%w: recovery inhibited for container %s (%s marker by op %s); nothing started", core.ErrConflict, id, m.Reason, m.Operation), werr)
	}
	if err := e.RetryPendingWithdrawals(ctx, app, name); err != nil { // R41.3
		return time.Time{}, false, err
	}
	st, err := e.Runtime.InspectContainer(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return e.recoverGone(ctx, app, name, as, rep)
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("inspect %s: %w", id, err)
	}
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return time.Time{}, false, err
	}
	v, seen := rec.Verified[name]
	fresh := !seen || v.Container != id || !v.StartedAt.Equal(st.StartedAt)
	transitional := st.Status == core.StatusRestarting || st.Status == "starting"
	// Also verified before any withdrawal: the container a successful
	// deploy switched to, whose verified-execution record only failed to
	// be written (a full state disk): the deploy probed it ready, the edge
	// routes it, and withdrawing it would drop requests.
	lost := !seen || v.Container != id // no record of this container at all (a restart has one)
	keepRouting := (overlapping || (lost && st.Running() && e.switchedBySuccess(ctx, app, name, as, st.StartedAt))) && fresh && st.Running()
	if (fresh && !keepRouting) || (!st.Running() && !transitional) { // R41.4
		if err := e.withdrawForRecovery(ctx, app, name, as); err != nil {
			return time.Time{}, false, err
		}
		fresh = true
	}
	started := false
	switch st.Status { // R41.5
	case core.StatusRunning:
	case core.StatusRestarting, "starting":
		return time.Time{}, false, nil
	case core.StatusCreated, core.StatusExited, core.StatusDead:
		why := st.Status
		if st.Status != core.StatusCreated {
			why = fmt.Sprintf("%s (exit code %d)", st.Status, st.ExitCode)
		}
		e.recordRecovery(ctx, app, name, id, why, "withdrawn, started", rep)
		if err := e.crashLoopStart(ctx, app, name, id, false, as.Spec.StopGrace); err != nil {
			return time.Time{}, false, err
		}
		started = true
	default:
		werr := e.WithdrawPrimary(ctx, app, name, time.Time{})
		return time.Time{}, false, errors.Join(fmt.Errorf("container %s is %q: withdrawn", id, st.Status), werr)
	}
	if st.Health == "unhealthy" && !started { // R41.6: as a dead container
		if err := e.WithdrawPrimary(ctx, app, name, time.Time{}); err != nil {
			return time.Time{}, false, err
		}
		why := "unhealthy"
		if st.HealthLog != "" {
			why += ": " + st.HealthLog
		}
		e.recordRecovery(ctx, app, name, id, why, "withdrawn, restarted", rep)
		if err := e.crashLoopStart(ctx, app, name, id, true, as.Spec.StopGrace); err != nil {
			return time.Time{}, false, err
		}
		started = true
	} else if !started {
		if _, err := e.countUnhealthy(ctx, app, name, id, false); err != nil {
			return time.Time{}, false, err
		}
	}
	if started {
		if st, err = e.Runtime.InspectContainer(ctx, id); err != nil {
			return time.Time{}, false, fmt.Errorf("inspect %s after start: %w", id, err)
		}
	}
	t, err := e.verifyAndRoute(ctx, app, name, as, st.StartedAt, fresh || started)
	if err != nil {
		werr := e.WithdrawPrimary(ctx, app, name, time.Time{})
		return time.Time{}, false, errors.Join(err, werr)
	}
	if started || fresh {
		e.resetCrashLoopIfStable(ctx, app, name, id, t)
	}
	e.EnsureRestartPolicy(ctx, app, name, st)
	return t, true, nil
}

// recoverGone is R41.3's not-found case: a container an interrupted
// replacement removed (the recovery record's Rebuild set names it) is
// rebuilt (rebuildInterrupted); any other is only released and withdrawn,
// and the error says nothing was rebuilt.
func (e *Engine) recoverGone(ctx context.Context, app, name string, as *core.ActiveService, rep *ReconcileReport) (time.Time, bool, error) {
	id := as.Container
	if rec, err := e.Store.LoadRecovery(ctx, app); err == nil && rec.Rebuild[name] == id {
		return e.rebuildInterrupted(ctx, app, name, as, rep)
	}
	rerr := e.Store.ReleaseClaims(ctx, app, id)
	werr := e.WithdrawPrimary(ctx, app, name, time.Time{})
	return time.Time{}, false, errors.Join(fmt.Errorf("%w: container %s is gone; traffic withdrawn, nothing rebuilt (docker gordon start %s rebuilds it)", core.ErrNotFound, id, app), rerr, werr)
}

// withdrawForRecovery is R41.4's withdrawal. A single-writer service is
// between generations until the pass routes it: its requests are held,
// not refused (R58), for at most its readiness timeout (MaxHold cap); the
// hold ends with the route, or after the pass (endHolds).
func (e *Engine) withdrawForRecovery(ctx context.Context, app, name string, as *core.ActiveService) error {
	var hold time.Time
	if as.Spec.SingleWriter() {
		hold = e.Now().Add(steps.HoldBound(&as.Spec, 0))
	}
	return e.WithdrawPrimary(ctx, app, name, hold)
}

// verifyAndRoute is R41.7: read binds; declared readiness when the
// execution is new to us; re-inspect; persist changed binds; rebuild when
// needed; record the execution (R37, R38).
func (e *Engine) verifyAndRoute(ctx context.Context, app, name string, as *core.ActiveService, startedAt time.Time, probe bool) (time.Time, error) {
	id := as.Container
	ep, err := e.ReadBinds(ctx, app, id, &as.Spec)
	if err != nil {
		return time.Time{}, err
	}
	if probe {
		r := readiness.DeclaredReadiness(&as.Spec)
		if r.Type != "" && r.Type != core.ReadinessNone {
			target, err := readiness.ProbeTargetFor(app, &as.Spec, r, id, startedAt, ep.Binds())
			if err != nil {
				return time.Time{}, err
			}
			target.App, target.Service = app, name
			if _, err := e.WaitReady(ctx, target, r, nil); err != nil {
				return time.Time{}, fmt.Errorf("readiness: %w", err)
			}
		}
	}
	st, err := e.Runtime.InspectContainer(ctx, id)
	if err != nil {
		return time.Time{}, fmt.Errorf("re-inspect %s: %w", id, err)
	}
	if !st.StartedAt.Equal(startedAt) || !st.Running() {
		return time.Time{}, fmt.Errorf("container %s restarted during verification", id)
	}
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		return time.Time{}, err
	}
	cur := active.Services[name]
	if cur == nil || cur.Container != id || cur.EffectiveRevision != as.EffectiveRevision {
		return time.Time{}, fmt.Errorf("%w: ACTIVE changed during verification", core.ErrConflict)
	}
	changed := !steps.ActiveEndpoints(cur).Equal(ep)
	if changed {
		ep.SetOn(cur)
		if err := e.Store.SaveActive(ctx, active); err != nil {
			return time.Time{}, err
		}
	}
	if changed || probe {
		if err := e.Rebuild(ctx); err != nil {
			return time.Time{}, err
		}
	}
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return time.Time{}, err
	}
	if rec.Verified == nil {
		rec.Verified = map[string]core.VerifiedExecution{}
	}
	rec.Verified[name] = core.VerifiedExecution{Container: id, StartedAt: startedAt}
	if err := e.Store.SaveRecovery(ctx, app, rec); err != nil {
		return time.Time{}, err
	}
	return startedAt, nil
}

// crashLoopStart starts (or restarts) the exact container under the
// crash-loop budget (SPEC §4): 3 real attempts, then waits of 1, 2, 4, 8
// and 15 minutes between attempts. A start refused by the budget is an
// error saying when the next attempt is due.
func (e *Engine) crashLoopStart(ctx context.Context, app, name, id string, restart bool, grace core.Duration) error {
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return err
	}
	cl := rec.CrashLoop[name]
	if cl.Container != id {
		cl = core.CrashLoop{Container: id}
	}
	now := e.Now()
	if cl.Attempts >= crashLoopFree {
		wait := crashLoopWaits[min(cl.Attempts-crashLoopFree, len(crashLoopWaits)-1)]
		if due := cl.LastAttempt.Add(wait); now.Before(due) {
			return fmt.Errorf("%w: container %s crash-looping (%d attempts); next start attempt after %s", core.ErrConflict, id, cl.Attempts, due.Format(time.RFC3339))
		}
	}
	cl.Attempts++
	cl.LastAttempt = now
	if rec.CrashLoop == nil {
		rec.CrashLoop = map[string]core.CrashLoop{}
	}
	rec.CrashLoop[name] = cl
	if err := e.Store.SaveRecovery(ctx, app, rec); err != nil {
		return err
	}
	if restart {
		err = e.Runtime.RestartContainer(ctx, id, steps.EffectiveGrace(grace))
	} else {
		err = e.Runtime.StartContainer(ctx, id)
	}
	if err != nil {
		verb := "start"
		if restart {
			verb = "restart"
		}
		if st, ierr := e.Runtime.InspectContainer(ctx, id); ierr == nil && st.Running() && !restart {
			return nil // raced with the engine's own restart: running is what we want
		}
		return fmt.Errorf("%s container %s: %w", verb, id, err)
	}
	return nil
}

// resetCrashLoopIfStable clears the counter once the execution has run for
// 5 minutes (§4).
func (e *Engine) resetCrashLoopIfStable(ctx context.Context, app, name, id string, startedAt time.Time) {
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return
	}
	cl, ok := rec.CrashLoop[name]
	if !ok || cl.Container != id || e.Now().Sub(startedAt) < crashLoopStable {
		return
	}
	delete(rec.CrashLoop, name)
	if err := e.Store.SaveRecovery(ctx, app, rec); err != nil {
		// The reset is retried by the next pass; nothing else depends on it.
		e.Log().Warn("reset crash-loop counter", "app", app, "service", name, "error", err)
	}
}

// recordRecovery journals why the pass recovers a serving container (the
// app's recovery record, shown by status) and logs it. A failure to save is
// only logged: the recovery goes on.
func (e *Engine) recordRecovery(ctx context.Context, app, name, id, why, action string, rep *ReconcileReport) {
	e.Log().Warn("recovering serving container", "app", app, "service", name, "container", id, "reason", why, "action", action)
	if rep != nil {
		rep.Recovered = append(rep.Recovered, name+": "+why+": "+action)
	}
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err == nil {
		if rec.Events == nil {
			rec.Events = map[string]core.RecoveryEvent{}
		}
		rec.Events[name] = core.RecoveryEvent{At: e.Now(), Container: id, Reason: why, Action: action}
		err = e.Store.SaveRecovery(ctx, app, rec)
	}
	if err != nil {
		e.Log().Warn("journal recovery", "app", app, "service", name, "error", err)
	}
}

// countUnhealthy tracks consecutive unhealthy passes; it returns true on
// the second (R41.6) and resets the count when healthy.
func (e *Engine) countUnhealthy(ctx context.Context, app, name, id string, unhealthy bool) (bool, error) {
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return false, err
	}
	cl := rec.CrashLoop[name]
	if cl.Container != id {
		cl = core.CrashLoop{Container: id}
	}
	prev := cl.UnhealthyPasses
	if unhealthy {
		cl.UnhealthyPasses++
	} else {
		cl.UnhealthyPasses = 0
	}
	if prev == cl.UnhealthyPasses {
		return false, nil
	}
	restart := cl.UnhealthyPasses >= 2
	if restart {
		cl.UnhealthyPasses = 0
	}
	if rec.CrashLoop == nil {
		rec.CrashLoop = map[string]core.CrashLoop{}
	}
	rec.CrashLoop[name] = cl
	return restart, e.Store.SaveRecovery(ctx, app, rec)
}

// stopConverge is R42 for one service of a stopped app: forget its
// history; a running or transitional container is stopped with its grace
// (never removed).
func (e *Engine) stopConverge(ctx context.Context, app, name string, as *core.ActiveService) error {
	if err := e.forgetVerified(ctx, app, name); err != nil {
		return err
	}
	if as == nil || as.Container == "" {
		return nil
	}
	// A stopped app routes nothing: its binds leave ACTIVE before the
	// container is stopped (the pass rebuilds afterwards).
	if err := e.WithdrawState(ctx, app, name); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	st, err := e.Runtime.InspectContainer(ctx, as.Container)
	if errors.Is(err, core.ErrNotFound) {
		// Gone: a claim a failed release left behind goes with it.
		if err := e.Store.ReleaseClaims(ctx, app, as.Container); err != nil {
			return fmt.Errorf("service %s: release claims of gone %s: %w", name, as.Container, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("service %s: inspect %s: %w", name, as.Container, err)
	}
	if st.Running() || st.Status == core.StatusRestarting || st.Status == "starting" {
		if err := e.Runtime.StopContainer(ctx, as.Container, steps.EffectiveGrace(as.Spec.StopGrace)); err != nil && !errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("service %s: stop revived container %s: %w", name, as.Container, err)
		}
	}
	return nil
}

// sleepConverge keeps a sleeping service asleep (SPEC R81): an instance
// found running (started by hand, or by the engine) is stopped again with
// the service's grace; none is ever started, rebuilt or routed here.
func (e *Engine) sleepConverge(ctx context.Context, app, name string, as *core.ActiveService) error {
	var errs []error
	for _, in := range as.Instances() {
		st, err := e.Runtime.InspectContainer(ctx, in.Container)
		if err != nil {
			continue // gone: a wake rebuilds nothing; the wake's failure says so
		}
		if st.Running() || st.Status == core.StatusRestarting || st.Status == "starting" {
			if err := e.Runtime.StopContainer(ctx, in.Container, steps.EffectiveGrace(as.Spec.StopGrace)); err != nil && !errors.Is(err, core.ErrNotFound) {
				errs = append(errs, fmt.Errorf("service %s: stop sleeping instance %s: %w", name, in.Container, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) forgetVerified(ctx context.Context, app, name string) error {
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return err
	}
	if _, ok := rec.Verified[name]; !ok {
		return nil
	}
	delete(rec.Verified, name)
	return e.Store.SaveRecovery(ctx, app, rec)
}
