package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Periodic pass defaults (SPEC §4).
const (
	// DefaultReconcileInterval is the periodic pass cadence (R39).
	DefaultReconcileInterval = 15 * time.Second
	// RecoveryBound bounds one app and one service in a pass (R39 [C]).
	RecoveryBound = 2 * time.Minute
	// crashLoopFree is the number of real start attempts before backoff.
	crashLoopFree = 3
	// crashLoopStable resets the crash-loop counter (§4).
	crashLoopStable = 5 * time.Minute
)

// ReconcileReport is what one pass did for one app.
type ReconcileReport struct {
	App string `json:"app"`
	// Skipped is true when the app lock was busy (R1: the pass only tries it).
	Skipped bool `json:"skipped,omitempty"`
	// Verified lists services whose serving execution this pass verified.
	Verified []string `json:"verified,omitempty"`
	// Retired lists superseded containers retired through their marker.
	Retired []string `json:"retired,omitempty"`
	// Recovered lists the serving containers this pass withdrew and
	// (re)started, with why: "web: unhealthy: <output>: withdrawn, restarted".
	Recovered []string `json:"recovered,omitempty"`
	// Errors are this app's failures (also joined into the pass's error).
	Errors []string `json:"errors,omitempty"`
	// Removed lists the containers labelled for the app that no record
	// owned, which this pass removed (R47).
	Removed []string `json:"removed,omitempty"`
	// Unknown says this state directory holds no record of the app (no
	// incarnation, no op in progress): the pass took no lock and touched
	// nothing, because its containers belong to another state directory.
	Unknown bool `json:"unknown,omitempty"`
	// Ended says the app's incarnation here has ended (its last op, a
	// remove, finished): nothing to reconcile, and the pass took no lock
	// and touched nothing (a container of that name belongs to another
	// state directory).
	Ended bool `json:"ended,omitempty"`
}

// Reconcile runs one periodic pass (SPEC R39–R44) over apps (every app
// when empty). Each app is taken with TryLock and skipped when busy; under
// the lock, an interrupted op is reconciled first (R45), then the pass
// proper. Errors of all apps are joined; a failing app never stops the
// next. Verified executions, pending withdrawals and crash-loop counters
// are durable (decision 3), so a fresh process behaves like the loop.
func (e *Engine) Reconcile(ctx context.Context, apps []string) ([]ReconcileReport, error) {
	if len(apps) == 0 {
		var err error
		if apps, err = e.Store.ListApps(ctx); err != nil {
			return nil, err
		}
	}
	var reports []ReconcileReport
	var errs []error
	for _, app := range apps {
		started := e.Now()
		rep, err := e.reconcileApp(ctx, app)
		if !rep.Skipped && ctx.Err() == nil {
			e.NotifyRecoveryFailure(ctx, app, started, err)
		}
		reports = append(reports, rep)
		if err != nil {
			errs = append(errs, fmt.Errorf("app %s: %w", app, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() == nil {
		if err := e.ensureRouted(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return reports, errors.Join(errs...)
}

func (e *Engine) reconcileApp(ctx context.Context, app string) (ReconcileReport, error) {
	rep := ReconcileReport{App: app}
	if known, ended, err := e.KnownHere(ctx, app); err != nil || !known {
		rep.Unknown, rep.Ended = err == nil && !ended, ended
		return rep, err
	}
	h := e.Holder
	h.Verb, h.StartedAt = "reconcile", e.Now()
	lock, ok, err := e.Store.TryLock(ctx, app, h)
	if err != nil {
		return rep, err
	}
	if !ok {
		rep.Skipped = true
		return rep, nil
	}
	defer lock.Unlock()
	actx, cancel := context.WithTimeout(ctx, RecoveryBound)
	defer cancel()
	if err := e.ReconcileInterrupted(actx, app, ""); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		return rep, err
	}
	if err := e.undoInterruptedRestores(actx, app); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	err = e.pass(actx, app, &rep)
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	// No flow of the app runs (its lock is ours): a hold left by a crash
	// ends here (R58), once the pass has published the real state: a
	// service the pass rebuilt or verified is routed by then (its requests
	// were held, not refused); one it could not recover answers 503.
	if herr := e.EndHolds(actx, app); herr != nil {
		rep.Errors = append(rep.Errors, herr.Error())
	}
	return rep, err
}

// pass is R40 for one app, under its lock.
func (e *Engine) pass(ctx context.Context, app string, rep *ReconcileReport) error {
	intent, err := e.Store.LoadIntent(ctx, app)
	if err != nil {
		return err
	}
	active, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) || (err == nil && len(active.Services) == 0) {
		removed, uerr := e.RemoveUnowned(ctx, app)
		rep.Removed = append(rep.Removed, removed...)
		return errors.Join(e.pruneRecovery(ctx, app, core.Active{}), uerr)
	}
	if err != nil {
		return err
	}
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		return fmt.Errorf("load markers: %w", err)
	}
	if markers, err = e.clearFinishedStrandedMarkers(ctx, app, markers); err != nil {
		return err
	}
	blocking := map[string]core.Marker{}
	var pending []core.Marker
	overlapping := map[string]bool{}
	for _, m := range markers {
		if m.Blocking() {
			blocking[m.Container] = m
		} else {
			pending = append(pending, m)
			overlapping[m.Service] = true
		}
	}
	var errs []error
	verified := map[string]time.Time{}
	names := steps.ActiveServiceNames(active)
	for _, name := range names {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		if intent.Stopped {
			if err := e.stopConverge(ctx, app, name, active.Services[name]); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if as := active.Services[name]; as != nil && as.AsleepSince != nil {
			errs = append(errs, e.sleepConverge(ctx, app, name, as)) // R81: never started here
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, RecoveryBound)
		t, ok, err := e.recoverService(sctx, app, name, blocking, overlapping[name], rep)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", name, err))
		}
		if ok {
			verified[name] = t
			rep.Verified = append(rep.Verified, name)
		}
		if err := e.refreshReplicas(ctx, app, name); err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", name, err))
		}
	}
	if intent.Stopped {
		if err := e.Rebuild(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Last: pending retirements (R43), only after this pass's verification.
	errs = append(errs, e.retirePending(ctx, app, intent.Stopped, pending, verified, rep)...)
	if cur, err := e.Store.LoadActive(ctx, app); err == nil {
		if err := e.pruneRecovery(ctx, app, cur); err != nil {
			errs = append(errs, err)
		}
	}
	if err := e.sweepLeftovers(ctx, app); err != nil {
		errs = append(errs, err)
	}
	// A snapshot a crash cut off has no manifest: never listed, removed here.
	if e.Snapshots != nil {
		if _, err := e.Snapshots.Sweep(app); err != nil {
			errs = append(errs, err)
		}
	}
	removed, err := e.RemoveUnowned(ctx, app)
	rep.Removed = append(rep.Removed, removed...)
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// retirePending is R43 with R44: retire every retirement-pending marker
// whose successor this pass verified (or any, when the app is stopped).
// Stacked predecessors are handled independently, in marker order.
func (e *Engine) retirePending(ctx context.Context, app string, stopped bool, pending []core.Marker, verified map[string]time.Time, rep *ReconcileReport) []error {
	if len(pending) == 0 {
		return nil
	}
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return []error{err}
	}
	named := map[string]bool{}
	for _, s := range active.Services {
		for _, in := range s.Instances() {
			named[in.Container] = true
		}
	}
	var errs []error
	for _, m := range pending {
		if named[m.Container] { // R43.1
			if err := e.Store.ClearMarker(ctx, app, m.Service, m.Container); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if !stopped && !e.successorVerified(ctx, active, m.Service, verified) { // R43.2
			continue
		}
		res := e.Retire(ctx, app, m.Container, steps.RetireOptions{ // R43.3
			Service: m.Service, Grace: steps.EffectiveGrace(m.StopGrace), ClearMarker: true, RetryOnLeak: true,
		})
		if !res.Settled { // R43.4
			errs = append(errs, fmt.Errorf("app %s: superseded container %s not retired: %w", app, m.Container, res.Err(m.Container)))
			continue
		}
		rep.Retired = append(rep.Retired, m.Container)
		for _, w := range res.Warnings { // R43.5
			e.Log().Warn("retired with leftovers", "app", app, "container", m.Container, "detail", w.Detail)
			errs = append(errs, fmt.Errorf("app %s: superseded container %s retired with leftovers: %s", app, m.Container, w.Detail))
		}
	}
	return errs
}

// successorVerified is R44.
func (e *Engine) successorVerified(ctx context.Context, active core.Active, service string, verified map[string]time.Time) bool {
	as := active.Services[service]
	if as == nil || as.Container == "" {
		return true
	}
	t, ok := verified[service]
	if !ok {
		return false
	}
	st, err := e.Runtime.InspectContainer(ctx, as.Container)
	return err == nil && st.Running() && st.StartedAt.Equal(t)
}

// pruneRecovery drops durable per-service state of generations ACTIVE no
// longer names (R40 last step).
func (e *Engine) pruneRecovery(ctx context.Context, app string, active core.Active) error {
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return err
	}
	changed := false
	for s, v := range rec.Verified {
		if as := active.Services[s]; as == nil || as.Container != v.Container {
			delete(rec.Verified, s)
			changed = true
		}
	}
	for s, c := range rec.CrashLoop {
		if as := active.Services[s]; as == nil || as.Container != c.Container {
			delete(rec.CrashLoop, s)
			changed = true
		}
	}
	for s, c := range rec.Rebuild {
		if as := active.Services[s]; as == nil || as.Container != c {
			delete(rec.Rebuild, s)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return e.Store.SaveRecovery(ctx, app, rec)
}

// clearFinishedStrandedMarkers clears the replacement-pending markers of
// finished ops that never created a candidate for the marker's service:
// the op's own way back (start the old generation again, then clear the
// marker) was cut off, by a runtime plugin that died during the snapshot,
// say. No candidate exists, so nothing can write beside the old
// generation: the marker protects nothing and would keep the service down
// for good (R47's rule for an unfinished op, applied to a finished one).
// It returns the markers left.
func (e *Engine) clearFinishedStrandedMarkers(ctx context.Context, app string, markers []core.Marker) ([]core.Marker, error) {
	var left []core.Marker
	for _, m := range markers {
		if m.Reason != core.MarkerReplacementPending || m.Operation == "" {
			left = append(left, m)
			continue
		}
		op, err := e.Store.LoadOp(ctx, app, m.Operation)
		if err != nil || !op.Terminal() || createdCandidate(op, m.Service) {
			left = append(left, m)
			continue
		}
		if err := e.Store.ClearMarker(ctx, app, m.Service, m.Container); err != nil {
			return nil, fmt.Errorf("service %s: clear the replacement-pending marker of %s left by finished op %s: %w", m.Service, m.Container, m.Operation, err)
		}
		e.Log().Info("cleared a stranded replacement-pending marker", "app", app, "service", m.Service, "container", m.Container, "op", m.Operation)
	}
	return left, nil
}

// createdCandidate reports whether op created a new container for service.
func createdCandidate(op core.Operation, service string) bool {
	for _, st := range op.Steps {
		if st.Service == service && st.After != "" {
			return true
		}
	}
	return false
}
