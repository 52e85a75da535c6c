package oprun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Texts of interrupted-op reconciliation (R47 [C]).
const (
	// textPublishedKept is the error of a not-succeeded step whose candidate
	// ACTIVE names.
	textPublishedKept = "operation interrupted before traffic publication: published container %s kept; routing will be republished"
	// textCandidateRemoved is the error of a step whose unpublished
	// candidate was force-removed (S55 matches "unpublished candidate was removed").
	textCandidateRemoved = "operation interrupted: unpublished candidate was removed (%s)"
	// textCandidateStuck is the error of a step whose unpublished candidate
	// could not be removed.
	textCandidateStuck = "operation interrupted: unpublished candidate %s could not be removed: %s"
)

// reconcileInterrupted converges the app's latest operation after a crash or
// an abandoned claim (SPEC R45–R48). Caller holds the app lock.
//
//   - R45: nothing to do when there is no op, or when the latest op is
//     non-terminal and its id is liveOp (live in this process).
//   - R46: a non-terminal op converges every step with an After; a terminal
//     op only its failed steps with an After. ACTIVE and markers are loaded
//     only when some step needs work.
//   - R47: a candidate ACTIVE names (any service) is kept; else it is
//     force-removed (R24). Then Before's marker is kept when the candidate is
//     published and the marker is retirement-pending, else cleared. A step
//     that fully converged gets its After cleared (the id stays in Detail).
//   - R48: a non-terminal op is finalized (success when every step had
//     succeeded, else failed); a terminal op is re-saved only if it changed.
//
// An unpublished candidate that is not confirmed gone fails closed: the
// journal is saved unfinalized (a non-terminal op stays latest, so R7
// refuses later mutations) and the error wraps ErrConflict and says what to
// do. Other errors wrap the store's error. It never touches traffic (R45).
func (e *Engine) ReconcileInterrupted(ctx context.Context, app string, liveOp string) error {
	op, err := e.Store.LatestOp(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("app %s: reconcile interrupted operation: load latest op: %w", app, err)
	}
	terminal := op.Terminal()
	if !terminal && liveOp != "" && op.ID == liveOp {
		return nil
	}
	r := &interruptedRun{e: e, app: app, op: &op, terminal: terminal, now: e.Now()}
	if work := r.workSteps(); len(work) > 0 {
		if err := r.loadPublished(ctx); err != nil {
			return err
		}
		for _, i := range work {
			r.convergeStep(ctx, &op.Steps[i])
		}
	}
	if err := r.removeUnjournaled(ctx); err != nil {
		return err
	}
	if len(r.stuck) > 0 {
		if r.changed {
			if err := e.Store.SaveOp(ctx, op); err != nil {
				e.Log().Warn("save interrupted operation", "app", app, "op", op.ID, "error", err)
			}
		}
		return fmt.Errorf("%w: app %s: interrupted operation %s left unpublished candidate(s) that could not be removed: %s; "+
			"remove them (docker rm -f <id>) or fix the runtime, then retry", core.ErrConflict, app, op.ID, strings.Join(r.stuck, ", "))
	}
	if err := r.recordRebuilds(ctx); err != nil {
		if r.changed {
			if serr := e.Store.SaveOp(ctx, op); serr != nil {
				e.Log().Warn("save interrupted operation", "app", app, "op", op.ID, "error", serr)
			}
		}
		return fmt.Errorf("%w: app %s: interrupted operation %s: record the generation to rebuild: %w", core.ErrConflict, app, op.ID, err)
	}
	if !terminal {
		if err := r.finalize(ctx); err != nil {
			return err
		}
	}
	if r.changed {
		if err := e.Store.SaveOp(ctx, op); err != nil {
			return fmt.Errorf("app %s: reconcile interrupted operation %s: save: %w", app, op.ID, err)
		}
	}
	return nil
}

// interruptedRun is the state of one reconcileInterrupted pass over the
// latest op: what ACTIVE publishes, the lazily loaded markers, whether the
// op changed and which candidates could not be removed.
type interruptedRun struct {
	e        *Engine
	app      string
	op       *core.Operation
	terminal bool
	now      time.Time

	published     map[string]bool
	markers       []core.Marker
	markersLoaded bool
	markersErr    error

	changed bool
	stuck   []string
}

// workSteps returns the indexes of the steps R46 converges: every step with
// an After of a non-terminal op, only the failed ones of a terminal op.
func (r *interruptedRun) workSteps() []int {
	var work []int
	for i, s := range r.op.Steps {
		if s.After == "" && len(s.Replicas) == 0 {
			continue
		}
		if !r.terminal || s.State == core.StepFailed {
			work = append(work, i)
		}
	}
	return work
}

// loadPublished loads ACTIVE (none is an empty one) and records the
// containers it names.
func (r *interruptedRun) loadPublished(ctx context.Context) error {
	active, err := r.e.Store.LoadActive(ctx, r.app)
	if errors.Is(err, core.ErrNotFound) {
		active, err = core.Active{App: r.app}, nil
	}
	if err != nil {
		return fmt.Errorf("app %s: reconcile interrupted operation %s: load ACTIVE: %w", r.app, r.op.ID, err)
	}
	r.published = map[string]bool{}
	for _, s := range active.Services {
		for _, in := range s.Instances() {
			r.published[in.Container] = true
		}
	}
	return nil
}

// markerReason returns the reason of the marker of (service, container), ""
// when there is none; markers are loaded once, on first use.
func (r *interruptedRun) markerReason(ctx context.Context, service, container string) (string, error) {
	if !r.markersLoaded {
		r.markers, r.markersErr = r.e.Store.LoadMarkers(ctx, r.app)
		r.markersLoaded = true
	}
	if r.markersErr != nil {
		return "", r.markersErr
	}
	for _, m := range r.markers {
		if m.Service == service && m.Container == container {
			return m.Reason, nil
		}
	}
	return "", nil
}

// convergeStep applies R47 to one step with an After: keep a published
// candidate, else force-remove it; then settle Before's marker; a step that
// fully converged gets its After cleared.
func (r *interruptedRun) convergeStep(ctx context.Context, st *core.Step) {
	cand := st.After
	isPublished := cand != "" && r.published[cand]
	converged := true
	if !r.convergeReplicas(ctx, st) {
		return
	}
	switch {
	case isPublished:
		r.keepPublished(st)
	case cand != "":
		var ok bool
		if converged, ok = r.removeCandidate(ctx, st, cand); !ok {
			return
		}
	}
	if !r.settleBeforeMarker(ctx, st, isPublished) {
		converged = false
	}
	if converged && st.State != core.StepSucceeded {
		st.After, st.Replicas = "", nil
		st.UpdatedAt = r.now
		r.changed = true
	}
}

// convergeReplicas applies R47 to the step's replica candidates: a replica
// ACTIVE names is kept, any other is force-removed. It reports false when
// one is not confirmed gone (recorded in stuck).
func (r *interruptedRun) convergeReplicas(ctx context.Context, st *core.Step) bool {
	ok := true
	for _, id := range st.Replicas {
		if r.published[id] {
			continue
		}
		if _, gone := r.removeCandidate(ctx, st, id); !gone {
			ok = false
		}
	}
	return ok
}

// keepPublished fails a not-succeeded step of a non-terminal op whose
// candidate ACTIVE names, keeping the candidate.
func (r *interruptedRun) keepPublished(st *core.Step) {
	if r.terminal || st.State == core.StepSucceeded {
		return
	}
	cand := st.After
	st.State = core.StepFailed
	st.Error = fmt.Sprintf(textPublishedKept, cand)
	st.Detail = reconcileDetail(st.Detail, "published container "+cand+" kept")
	st.UpdatedAt = r.now
	r.changed = true
}

// removeCandidate force-removes the step's unpublished candidate (R24). ok
// is false when it is not confirmed gone (recorded in stuck); converged is
// false when claims leaked (retried next time).
func (r *interruptedRun) removeCandidate(ctx context.Context, st *core.Step, cand string) (converged, ok bool) {
	res := r.e.Retire(ctx, r.app, cand, steps.RetireOptions{Service: st.Service, Force: true})
	if len(res.Warnings) > 0 {
		r.op.Warnings = reconcileWarnings(r.op.Warnings, res.Warnings)
		r.changed = true
	}
	if !res.Gone {
		detail := "container not confirmed gone"
		if len(res.Warnings) > 0 {
			detail = res.Warnings[0].Detail
		}
		if !r.terminal {
			st.State = core.StepFailed
			st.Error = fmt.Sprintf(textCandidateStuck, cand, detail)
			st.UpdatedAt = r.now
			r.changed = true
		}
		r.stuck = append(r.stuck, fmt.Sprintf("%s (%s)", cand, detail))
		return false, false
	}
	if !r.terminal && st.State != core.StepFailed {
		st.State = core.StepFailed
		r.changed = true
	}
	if !r.terminal {
		st.Error = fmt.Sprintf(textCandidateRemoved, cand)
	}
	d := reconcileDetail(st.Detail, "removed unpublished candidate "+cand)
	if d != st.Detail {
		st.Detail, st.UpdatedAt, r.changed = d, r.now, true
	}
	return res.Settled, true
}

// settleBeforeMarker keeps Before's marker when the candidate is published
// and the marker is retirement-pending (R43 retires it once the successor
// is verified), else clears it. It reports false when a load or clear
// failed (recorded as a warning).
func (r *interruptedRun) settleBeforeMarker(ctx context.Context, st *core.Step, isPublished bool) bool {
	if st.Service == "" || st.Before == "" || st.Before == st.After {
		return true
	}
	reason, err := r.markerReason(ctx, st.Service, st.Before)
	switch {
	case err != nil:
		r.op.Warnings = reconcileWarnings(r.op.Warnings, []core.Warning{{Service: st.Service, Leftover: st.Before,
			Detail: "load recovery inhibition markers: " + err.Error()}})
		r.changed = true
		return false
	case isPublished && reason == core.MarkerRetirementPending:
		// R43 retires it once the successor is verified.
	case reason == "":
		// Nothing to clear.
	default:
		if err := r.e.Store.ClearMarker(ctx, r.app, st.Service, st.Before); err != nil {
			r.op.Warnings = reconcileWarnings(r.op.Warnings, []core.Warning{{Service: st.Service, Leftover: st.Before,
				Detail: "clear recovery inhibition: " + err.Error()}})
			r.changed = true
			return false
		}
	}
	return true
}

// finalize ends a non-terminal op (R48): stranded replacement markers
// cleared, success when every step succeeded, else failed. A failed clear
// fails closed: the op is saved unfinalized and the error wraps ErrConflict.
func (r *interruptedRun) finalize(ctx context.Context) error {
	e, op := r.e, r.op
	if err := e.clearStrandedReplacementMarkers(ctx, op); err != nil {
		// Fail closed like a stuck orphan: the op stays latest and
		// unfinalized, so the next reconciliation retries the clear.
		if serr := e.Store.SaveOp(ctx, *op); serr != nil {
			e.Log().Warn("save interrupted operation", "app", r.app, "op", op.ID, "error", serr)
		}
		return fmt.Errorf("%w: app %s: interrupted operation %s: %w", core.ErrConflict, r.app, op.ID, err)
	}
	if len(op.Steps) == 0 {
		// Nothing recorded that it finished: a crash right after the
		// claim (remove and restart claim with no steps, R53, R55) may
		// have done part of the work. Never call that a success.
		op.Steps = append(op.Steps, core.Step{ID: steps.StepError, State: core.StepFailed, UpdatedAt: e.Now(),
			Error: textInterruptedBeforeFirstStep})
	}
	op.Outcome = core.OutcomeSuccess
	for _, s := range op.Steps {
		if s.State != core.StepSucceeded {
			op.Outcome = core.OutcomeFailed
			break
		}
	}
	op.FinishedAt = e.Now()
	r.changed = true
	return nil
}

// reconcileDetail appends note to detail ("; "-separated) unless already there.
func reconcileDetail(detail, note string) string {
	if strings.Contains(detail, note) {
		return detail
	}
	if detail == "" {
		return note
	}
	return detail + "; " + note
}

// reconcileWarnings appends the warnings of add not already in ws.
func reconcileWarnings(ws, add []core.Warning) []core.Warning {
	for _, w := range add {
		if !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	return ws
}

// textInterruptedBeforeFirstStep is the error of an op interrupted before
// it journaled any step.
const textInterruptedBeforeFirstStep = "operation interrupted before it journaled a step; its effects may be partial: run the verb again"

// textInterruptedBeforeCandidate is the error of a step the crash cut off
// before it created a candidate.
const textInterruptedBeforeCandidate = "operation interrupted before a candidate was created; nothing of this step is left running"

// TextInterruptedRestore begins the error of a restore step
// (service.X.restore) the crash cut off: the volumes may hold part of the
// snapshot. Reconciliation then puts back the data the op snapshotted
// just before, and adds what it did.
const TextInterruptedRestore = "operation interrupted while restoring a snapshot into the volumes, which may hold part of it"

// textInterruptedDump (app, service) is the error of an online dump step
// (service.X.dump) the crash cut off: its partial snapshot is never
// listed, and is removed.
const textInterruptedDump = "operation interrupted during the online dump; nothing of it was kept (its command may still be running in the container until it ends): take one now with docker gordon snapshots create %s --service %s"

// clearStrandedReplacementMarkers finishes the steps of a non-terminal op
// that never created a candidate (no After): such a step may have written a
// replacement-pending marker for the old single-writer generation (R19.3)
// and then been cut off before the old one was stopped or while it was
// being retired. No candidate exists, so nothing can write beside the old
// generation: the marker protects nothing (R26) and would only keep the
// periodic pass and start from reviving or rebuilding the service. Markers
// this op wrote for the step's service are cleared and every such pending
// step is failed as interrupted. A load or clear failure is returned (the
// step stays pending, so the next reconciliation retries).
func (e *Engine) clearStrandedReplacementMarkers(ctx context.Context, op *core.Operation) error {
	var markers []core.Marker
	loaded := false
	now := e.Now()
	for i := range op.Steps {
		st := &op.Steps[i]
		if st.State != core.StepPending || st.After != "" {
			continue
		}
		if st.Service != "" {
			if !loaded {
				var err error
				markers, err = e.Store.LoadMarkers(ctx, op.App)
				loaded = true
				if err != nil {
					return fmt.Errorf("load recovery inhibition markers: %w", err)
				}
			}
			for _, m := range markers {
				if m.Service != st.Service || m.Reason != core.MarkerReplacementPending || m.Operation != op.ID {
					continue
				}
				if err := e.Store.ClearMarker(ctx, op.App, m.Service, m.Container); err != nil {
					return fmt.Errorf("service %s: clear replacement-pending marker of %s: %w", m.Service, m.Container, err)
				}
				st.Detail = reconcileDetail(st.Detail, "cleared replacement-pending marker of "+m.Container)
			}
		}
		errText := textInterruptedBeforeCandidate
		switch {
		case strings.HasSuffix(st.ID, ".dump"):
			errText = fmt.Sprintf(textInterruptedDump, op.App, st.Service)
		case strings.HasSuffix(st.ID, ".restore"):
			errText = TextInterruptedRestore
		}
		if strings.Contains(st.Detail, noteUnjournaled) {
			errText = textInterruptedUnjournaled
		}
		st.State, st.Error, st.UpdatedAt = core.StepFailed, errText, now
	}
	return nil
}
