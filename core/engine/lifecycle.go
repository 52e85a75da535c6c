package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// LifecycleRequest is one stop, start, restart or remove (SPEC 2.J).
type LifecycleRequest struct {
	// App is the app name (required).
	App string
	// Services restricts a restart to these services (each must be in
	// ACTIVE, else ErrConflict, R53). Stop, start and remove act on the
	// whole app and refuse a non-empty list with ErrInvalid.
	Services []string
	// OpKey is the caller's idempotency key (R6); "" generates an op id.
	OpKey string
}

// OpResult is the outcome of a lifecycle verb (SPEC R50–R55).
type OpResult struct {
	// Op is the journaled operation as last saved.
	Op core.Operation `json:"op"`
	// Services holds one result per service acted on, in name order
	// (stop adds one for a service absent from ACTIVE only when its
	// retirement-pending marker produced a warning or a failure, decision 7).
	Services []ServiceResult `json:"services"`
	// Outcome is success, partial or failed (R9).
	Outcome core.Outcome `json:"outcome"`
	// Warnings are the journal warnings (R10).
	Warnings []core.Warning `json:"warnings,omitempty"`
	// Replayed is true when OpKey named an existing op (R6, R8): nothing ran.
	Replayed bool `json:"replayed,omitempty"`
}

// lifecycleRun is the state of one executing lifecycle op.
type lifecycleRun struct {
	e           *Engine
	app         string
	op          *core.Operation
	results     []ServiceResult
	appWarnings []core.Warning
	appFailed   bool
	started     time.Time
}

// progress reports a phase of service with the time since the op started.
func (r *lifecycleRun) progress(service string, phase Phase, detail string, done bool) {
	r.e.progress(ProgressEvent{App: r.app, Service: service, Phase: phase, Detail: detail, Elapsed: time.Since(r.started), Done: done})
}

// checkApp refuses an empty app name (ErrInvalid) and an unknown app
// (ErrNotFound). An unknown app whose ops still hold req.OpKey (a removed
// app: its journal is kept) is a replay: the stored projection and the R8
// disposition are returned with ok=false.
func (e *Engine) checkApp(ctx context.Context, kind string, req LifecycleRequest, fingerprint string) (*OpResult, bool, error) {
	if req.App == "" {
		return nil, false, fmt.Errorf("%w: %s: no app given", core.ErrInvalid, kind)
	}
	_, err := e.Store.LoadApp(ctx, req.App)
	if err == nil {
		return nil, true, nil
	}
	if !errors.Is(err, core.ErrNotFound) {
		return nil, false, fmt.Errorf("%s %s: load app: %w", kind, req.App, err)
	}
	if req.OpKey != "" {
		if ops, lerr := e.Store.ListOps(ctx, req.App); lerr == nil {
			for _, op := range ops {
				if op.Key != req.OpKey {
					continue
				}
				if op.Kind != kind || op.Fingerprint != fingerprint {
					return projectOp(op), false, fmt.Errorf("%w: app %s: operation key %q was used by operation %s (%s) for a different request",
						core.ErrConflict, req.App, req.OpKey, op.ID, op.Kind)
				}
				return projectOp(op), false, replayError(op)
			}
		}
	}
	return nil, false, fmt.Errorf("%w: %s: unknown app %q", core.ErrNotFound, kind, req.App)
}

// claimLifecycle is the rest of SPEC R49's preamble; the caller holds the
// app lock: store self-recovery, interrupted-op reconciliation (failure
// aborts), then the claim. claimed=false means a refusal (nil result) or a
// replay (stored projection, R8 error).
func (e *Engine) claimLifecycle(ctx context.Context, kind string, req LifecycleRequest, fingerprint string, steps []core.Step) (*lifecycleRun, *OpResult, error) {
	app := req.App
	if err := e.Store.Recover(ctx); err != nil {
		return nil, nil, fmt.Errorf("%s %s: store self-recovery: %w", kind, app, err)
	}
	if err := e.reconcileInterrupted(ctx, app, e.liveOp(app)); err != nil {
		return nil, nil, fmt.Errorf("%s %s: reconcile interrupted operation: %w", kind, app, err)
	}
	now := e.now()
	for i := range steps {
		steps[i].StartedAt, steps[i].UpdatedAt = now, now
	}
	op := core.Operation{ID: e.newOpID(), Kind: kind, App: app, Key: req.OpKey, Fingerprint: fingerprint, StartedAt: now, Steps: steps}
	stored, claimed, err := e.claimOp(ctx, op)
	if !claimed {
		if stored.ID == "" {
			return nil, nil, fmt.Errorf("%s %s: %w", kind, app, err)
		}
		return nil, projectOp(stored), err
	}
	return &lifecycleRun{e: e, app: app, op: &stored, started: time.Now()}, nil, nil
}

// projectOp is the stored projection of an op (R8): one result per
// service step, outcome and warnings.
func projectOp(op core.Operation) *OpResult {
	r := &OpResult{Op: op, Outcome: op.Outcome, Warnings: op.Warnings, Replayed: true}
	for _, s := range op.Steps {
		if s.Service == "" || IsHookStep(s.ID) {
			continue
		}
		sr := ServiceResult{Service: s.Service, Before: s.Before, After: s.After, Error: s.Error, Diagnostics: s.Diagnostics}
		switch s.State {
		case core.StepFailed:
			sr.Result = ResultFailed
		case core.StepSucceeded:
			sr.Result = ResultDeployed
		}
		r.Services = append(r.Services, sr)
	}
	return r
}

// stepAt appends a pending step and returns its index (pointers into
// op.Steps do not survive appends).
func (r *lifecycleRun) stepAt(id, service, before string) int {
	now := r.e.now()
	r.op.Steps = append(r.op.Steps, core.Step{ID: id, State: core.StepPending, Service: service, Before: before, StartedAt: now, UpdatedAt: now})
	return len(r.op.Steps) - 1
}

// setStep sets step i's state and error.
func (r *lifecycleRun) setStep(i int, state core.StepState, errText string) {
	s := &r.op.Steps[i]
	s.State, s.Error, s.UpdatedAt = state, errText, r.e.now()
}

// save saves the journal; a failure is only logged (R11, R14.8).
func (r *lifecycleRun) save(ctx context.Context) {
	if err := r.e.Store.SaveOp(context.WithoutCancel(ctx), *r.op); err != nil {
		r.e.log().Error("save operation", "app", r.app, "op", r.op.ID, "error", err)
	}
}

// saveStrict saves the journal and returns the error.
func (r *lifecycleRun) saveStrict(ctx context.Context) error {
	if err := r.e.Store.SaveOp(context.WithoutCancel(ctx), *r.op); err != nil {
		return fmt.Errorf("app %s: save operation %s: %w", r.app, r.op.ID, err)
	}
	return nil
}

// finalize computes outcome (R9, appFailed forcing failed) and warnings
// (R10) and stamps the finish time; it does not save.
func (r *lifecycleRun) finalize() {
	sort.SliceStable(r.results, func(i, j int) bool { return r.results[i].Service < r.results[j].Service })
	r.op.Outcome = outcome(r.results, r.appFailed)
	r.op.Warnings = warnings(r.results, r.appWarnings)
	r.op.FinishedAt = r.e.now()
}

// fail is R11 at app level: warnings recomputed, a failed stepID step
// appended, outcome failed, saved (failure logged).
func (r *lifecycleRun) fail(ctx context.Context, stepID string, err error) {
	sort.SliceStable(r.results, func(i, j int) bool { return r.results[i].Service < r.results[j].Service })
	r.op.Warnings = warnings(r.results, r.appWarnings)
	r.e.failOp(ctx, r.op, stepID, err.Error())
}

// result projects the run.
func (r *lifecycleRun) result() *OpResult {
	return &OpResult{Op: *r.op, Services: r.results, Outcome: r.op.Outcome, Warnings: r.op.Warnings}
}

// resultFor returns the result of service, appending an empty one when absent.
func (r *lifecycleRun) resultFor(service string) *ServiceResult {
	for i := range r.results {
		if r.results[i].Service == service {
			return &r.results[i]
		}
	}
	r.results = append(r.results, ServiceResult{Service: service})
	return &r.results[len(r.results)-1]
}

// failedErr returns nil when no service failed, else an error wrapping
// ErrConflict that lists each failed service with its error (R50, R53).
func (r *lifecycleRun) failedErr(kind string) error {
	var parts []string
	for _, s := range r.results {
		if s.Result == ResultFailed {
			parts = append(parts, fmt.Sprintf("%s (%s)", s.Service, s.Error))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s %s: failed services: %s", core.ErrConflict, kind, r.app, strings.Join(parts, "; "))
}

// recordExecutions records the verified execution of every deployed
// result with an After and a start time (R37). Failures are only logged.
func (r *lifecycleRun) recordExecutions(ctx context.Context) {
	rec, err := r.e.Store.LoadRecovery(ctx, r.app)
	if err != nil {
		r.e.log().Warn("record verified executions", "app", r.app, "error", err)
		return
	}
	changed := false
	for _, s := range r.results {
		if s.Result != ResultDeployed || s.After == "" || s.StartedAt.IsZero() {
			continue
		}
		if rec.Verified == nil {
			rec.Verified = map[string]core.VerifiedExecution{}
		}
		rec.Verified[s.Service] = core.VerifiedExecution{Container: s.After, StartedAt: s.StartedAt}
		changed = true
	}
	if !changed {
		return
	}
	if err := r.e.Store.SaveRecovery(ctx, r.app, rec); err != nil {
		r.e.log().Warn("record verified executions", "app", r.app, "error", err)
	}
}

// blockingMarker returns the blocking marker (R26) on container, if any.
func blockingMarker(markers []core.Marker, container string) (core.Marker, bool) {
	for _, m := range markers {
		if m.Container == container && m.Blocking() {
			return m, true
		}
	}
	return core.Marker{}, false
}

// lifecyclePreamble is the start stop, start, restart and remove share
// (R7, R8, R12): an app is named and known (checkApp; an unknown app with
// the request's key stored replays that op), then the app lock is taken.
// ok is false when res and err answer the call; else the caller holds lk
// and must Unlock it. A lock error names the verb and app.
func (e *Engine) lifecyclePreamble(ctx context.Context, kind string, req LifecycleRequest, fp string) (lk core.AppLock, res *OpResult, ok bool, err error) {
	if res, ok, err := e.checkApp(ctx, kind, req, fp); !ok {
		return nil, res, false, err
	}
	lk, err = e.lock(ctx, req.App, kind, "")
	if err != nil {
		return nil, nil, false, fmt.Errorf("%s %s: %w", kind, req.App, err)
	}
	return lk, nil, true, nil
}

// refuseServices refuses a service selection for whole-app verbs.
func refuseServices(kind string, req LifecycleRequest) error {
	if len(req.Services) > 0 {
		return fmt.Errorf("%w: %s %s: acts on the whole app; --service is not supported", core.ErrInvalid, kind, req.App)
	}
	return nil
}

// setIntent persists the stopped flag (R50, R51, R55), keeping the
// app's maintenance record (R75).
func (e *Engine) setIntent(ctx context.Context, app, opID string, stopped bool) error {
	in, err := e.Store.LoadIntent(ctx, app)
	if err != nil {
		return fmt.Errorf("app %s: persist intent stopped=%t: load intent: %w", app, stopped, err)
	}
	in.Stopped, in.UpdatedBy, in.UpdatedAt = stopped, opID, e.now()
	if err := e.Store.SaveIntent(ctx, app, in); err != nil {
		return fmt.Errorf("app %s: persist intent stopped=%t: %w", app, stopped, err)
	}
	return nil
}

// svcStep is one service's step of start or restart (R51–R53): res is the
// service's result; fail or succeed finishes the step once.
type svcStep struct {
	r              *lifecycleRun
	i              int
	verb, name, id string
	res            ServiceResult
}

func (r *lifecycleRun) newSvcStep(i int, verb, name, id string, as *core.ActiveService) *svcStep {
	s := &svcStep{r: r, i: i, verb: verb, name: name, id: id, res: ServiceResult{Service: name, Before: id}}
	if as != nil {
		s.res.SingleWriter = as.Spec.SingleWriter()
	}
	return s
}

// fail journals the step failed with err (a state conflict naming the verb,
// app and service) and diags; dropBinds withdraws the service's binds from
// ACTIVE (withdraw-state), a failure of which becomes a warning.
func (s *svcStep) fail(ctx context.Context, err error, diags []string, dropBinds bool) {
	r := s.r
	err = fmt.Errorf("%w: %s %s: service %s: %w", core.ErrConflict, s.verb, r.app, s.name, err)
	s.res.Result, s.res.Error, s.res.Diagnostics = ResultFailed, err.Error(), diags
	r.op.Steps[s.i].Diagnostics = diags
	r.setStep(s.i, core.StepFailed, err.Error())
	if dropBinds {
		if werr := r.e.withdrawState(ctx, r.app, s.name); werr != nil {
			s.res.Warnings = append(s.res.Warnings, core.Warning{Service: s.name, Leftover: s.id, Detail: "drop binds: " + werr.Error()})
		}
	}
	r.results = append(r.results, s.res)
	r.progress(s.name, PhaseFailed, err.Error(), true)
}

// succeed journals the step succeeded with after as the serving container.
func (s *svcStep) succeed(after string, ep endpoints, startedAt time.Time) {
	r := s.r
	s.res.Result, s.res.After, s.res.StartedAt = ResultDeployed, after, startedAt
	ep.setOnResult(&s.res)
	r.op.Steps[s.i].After = after
	r.setStep(s.i, core.StepSucceeded, "")
	r.results = append(r.results, s.res)
	r.progress(s.name, PhaseDone, after, true)
}
