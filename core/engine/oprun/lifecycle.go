package oprun

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

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
	// Verb names the op in the app lock's holder when it is not the
	// kind ("backup", "snapshot", "restore": restarts with data), so a
	// verb that waits says what it waits for.
	Verb string
}

// OpResult is the outcome of a lifecycle verb (SPEC R50–R55).
type OpResult struct {
	// Op is the journaled operation as last saved.
	Op core.Operation `json:"op"`
	// Services holds one result per service acted on, in name order
	// (stop adds one for a service absent from ACTIVE only when its
	// retirement-pending marker produced a warning or a failure, decision 7).
	Services []steps.ServiceResult `json:"services"`
	// Outcome is success, partial or failed (R9).
	Outcome core.Outcome `json:"outcome"`
	// Warnings are the journal warnings (R10).
	Warnings []core.Warning `json:"warnings,omitempty"`
	// Replayed is true when OpKey named an existing op (R6, R8): nothing ran.
	Replayed bool `json:"replayed,omitempty"`
	// KeptVolumes are the Docker volume names a remove left in place (R3:
	// data is never deleted by a verb), so the user knows what remains.
	KeptVolumes []string `json:"kept_volumes,omitempty"`
}

// lifecycleRun is the state of one executing lifecycle op.
type LifecycleRun struct {
	E           *Engine
	App         string
	Op          *core.Operation
	Results     []steps.ServiceResult
	AppWarnings []core.Warning
	// KeptVolumes is OpResult.KeptVolumes (set by remove).
	KeptVolumes []string
	AppFailed   bool
	Started     time.Time
	// Checks is the memo of the app lock's hold the run is under (nil:
	// none; every check asks afresh).
	Checks *steps.HeldChecks
}

// progress reports a phase of service with the time since the op started.
func (r *LifecycleRun) Emit(service string, phase steps.Phase, detail string, done bool) {
	r.E.Emit(steps.ProgressEvent{App: r.App, Service: service, Phase: phase, Detail: detail, Elapsed: time.Since(r.Started), Done: done})
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
				return projectOp(op), false, steps.ReplayError(op)
			}
		}
	}
	return nil, false, fmt.Errorf("%w: %s: unknown app %q", core.ErrNotFound, kind, req.App)
}

// claimLifecycle is the rest of SPEC R49's preamble; the caller holds the
// app lock: store self-recovery, interrupted-op reconciliation (failure
// aborts), then the claim. claimed=false means a refusal (nil result) or a
// replay (stored projection, R8 error).
func (e *Engine) ClaimLifecycle(ctx context.Context, kind string, req LifecycleRequest, fingerprint string, steps []core.Step) (*LifecycleRun, *OpResult, error) {
	app := req.App
	if err := e.Store.Recover(ctx); err != nil {
		return nil, nil, fmt.Errorf("%s %s: store self-recovery: %w", kind, app, err)
	}
	if err := e.ReconcileInterrupted(ctx, app, e.LiveOp(app)); err != nil {
		return nil, nil, fmt.Errorf("%s %s: reconcile interrupted operation: %w", kind, app, err)
	}
	now := e.Now()
	for i := range steps {
		steps[i].StartedAt, steps[i].UpdatedAt = now, now
	}
	op := core.Operation{ID: e.NextOpID(), Kind: kind, App: app, Key: req.OpKey, Fingerprint: fingerprint, StartedAt: now, Steps: steps}
	stored, claimed, err := e.ClaimOp(ctx, op)
	if !claimed {
		if stored.ID == "" {
			return nil, nil, fmt.Errorf("%s %s: %w", kind, app, err)
		}
		return nil, projectOp(stored), err
	}
	return &LifecycleRun{E: e, App: app, Op: &stored, Started: time.Now()}, nil, nil
}

// projectOp is the stored projection of an op (R8): one result per
// service step, outcome and warnings.
func projectOp(op core.Operation) *OpResult {
	r := &OpResult{Op: op, Outcome: op.Outcome, Warnings: op.Warnings, Replayed: true}
	for _, s := range op.Steps {
		if s.Service == "" || steps.IsSubStep(s.ID) {
			continue
		}
		sr := steps.ServiceResult{Service: s.Service, Before: s.Before, After: s.After, Error: s.Error, Diagnostics: s.Diagnostics}
		switch s.State {
		case core.StepFailed:
			sr.Result = steps.ResultFailed
		case core.StepSucceeded:
			sr.Result = steps.ResultDeployed
		}
		r.Services = append(r.Services, sr)
	}
	return r
}

// stepAt appends a pending step and returns its index (pointers into
// op.Steps do not survive appends).
func (r *LifecycleRun) StepAt(id, service, before string) int {
	now := r.E.Now()
	r.Op.Steps = append(r.Op.Steps, core.Step{ID: id, State: core.StepPending, Service: service, Before: before, StartedAt: now, UpdatedAt: now})
	return len(r.Op.Steps) - 1
}

// setStep sets step i's state and error.
func (r *LifecycleRun) SetStep(i int, state core.StepState, errText string) {
	s := &r.Op.Steps[i]
	s.State, s.Error, s.UpdatedAt = state, errText, r.E.Now()
}

// save saves the journal; a failure is only logged (R11, R14.8).
func (r *LifecycleRun) Save(ctx context.Context) {
	if err := r.E.Store.SaveOp(context.WithoutCancel(ctx), *r.Op); err != nil {
		r.E.Log().Error("save operation", "app", r.App, "op", r.Op.ID, "error", err)
	}
}

// saveStrict saves the journal and returns the error.
func (r *LifecycleRun) SaveStrict(ctx context.Context) error {
	if err := r.E.Store.SaveOp(context.WithoutCancel(ctx), *r.Op); err != nil {
		return fmt.Errorf("app %s: save operation %s: %w", r.App, r.Op.ID, err)
	}
	return nil
}

// finalize computes outcome (R9, appFailed forcing failed) and warnings
// (R10) and stamps the finish time; it does not save.
func (r *LifecycleRun) Finalize() {
	sort.SliceStable(r.Results, func(i, j int) bool { return r.Results[i].Service < r.Results[j].Service })
	r.Op.Outcome = steps.Outcome(r.Results, r.AppFailed)
	r.Op.Warnings = steps.Warnings(r.Results, r.AppWarnings)
	r.Op.FinishedAt = r.E.Now()
}

// fail is R11 at app level: warnings recomputed, a failed stepID step
// appended, outcome failed, saved (failure logged).
func (r *LifecycleRun) Fail(ctx context.Context, stepID string, err error) {
	sort.SliceStable(r.Results, func(i, j int) bool { return r.Results[i].Service < r.Results[j].Service })
	r.Op.Warnings = steps.Warnings(r.Results, r.AppWarnings)
	r.E.FailOp(ctx, r.Op, stepID, err.Error())
}

// result projects the run.
func (r *LifecycleRun) Result() *OpResult {
	return &OpResult{Op: *r.Op, Services: r.Results, Outcome: r.Op.Outcome, Warnings: r.Op.Warnings, KeptVolumes: r.KeptVolumes}
}

// resultFor returns the result of service, appending an empty one when absent.
func (r *LifecycleRun) ResultFor(service string) *steps.ServiceResult {
	for i := range r.Results {
		if r.Results[i].Service == service {
			return &r.Results[i]
		}
	}
	r.Results = append(r.Results, steps.ServiceResult{Service: service})
	return &r.Results[len(r.Results)-1]
}

// failedErr returns nil when no service failed, else an error wrapping
// ErrConflict that lists each failed service with its error (R50, R53).
func (r *LifecycleRun) FailedErr(kind string) error {
	var parts []string
	for _, s := range r.Results {
		if s.Result == steps.ResultFailed {
			parts = append(parts, fmt.Sprintf("%s (%s)", s.Service, s.Error))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s %s: failed services: %s", core.ErrConflict, kind, r.App, strings.Join(parts, "; "))
}

// recordExecutions records the verified execution of every deployed
// result with an After and a start time (R37). Failures are only logged.
func (r *LifecycleRun) RecordExecutions(ctx context.Context) {
	rec, err := r.E.Store.LoadRecovery(ctx, r.App)
	if err != nil {
		r.E.Log().Warn("record verified executions", "app", r.App, "error", err)
		return
	}
	changed := false
	for _, s := range r.Results {
		if s.Result != steps.ResultDeployed || s.After == "" || s.StartedAt.IsZero() {
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
	if err := r.E.Store.SaveRecovery(ctx, r.App, rec); err != nil {
		r.E.Log().Warn("record verified executions", "app", r.App, "error", err)
	}
}

// blockingMarker returns the blocking marker (R26) on container, if any.
func BlockingMarker(markers []core.Marker, container string) (core.Marker, bool) {
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
func (e *Engine) LifecyclePreamble(ctx context.Context, kind string, req LifecycleRequest, fp string) (lk *steps.Hold, res *OpResult, ok bool, err error) {
	if res, ok, err := e.checkApp(ctx, kind, req, fp); !ok {
		return nil, res, false, err
	}
	holder := kind
	if req.Verb != "" {
		holder = req.Verb
	}
	lk, err = e.Lock(ctx, req.App, holder, "")
	if err != nil {
		return nil, nil, false, fmt.Errorf("%s %s: %w", kind, req.App, err)
	}
	return lk, nil, true, nil
}

// refuseServices refuses a service selection for whole-app verbs.
func RefuseServices(kind string, req LifecycleRequest) error {
	if len(req.Services) > 0 {
		return fmt.Errorf("%w: %s %s: acts on the whole app; --service is not supported", core.ErrInvalid, kind, req.App)
	}
	return nil
}

// setIntent persists the stopped flag (R50, R51, R55), keeping the
// app's maintenance record (R75).
func (e *Engine) SetIntent(ctx context.Context, app, opID string, stopped bool) error {
	in, err := e.Store.LoadIntent(ctx, app)
	if err != nil {
		return fmt.Errorf("app %s: persist intent stopped=%t: load intent: %w", app, stopped, err)
	}
	in.Stopped, in.UpdatedBy, in.UpdatedAt = stopped, opID, e.Now()
	if err := e.Store.SaveIntent(ctx, app, in); err != nil {
		return fmt.Errorf("app %s: persist intent stopped=%t: %w", app, stopped, err)
	}
	return nil
}

// svcStep is one service's step of start or restart (R51–R53): res is the
// service's result; fail or succeed finishes the step once.
type SvcStep struct {
	r              *LifecycleRun
	I              int
	verb, Name, Id string
	Res            steps.ServiceResult
}

func (r *LifecycleRun) NewSvcStep(i int, verb, name, id string, as *core.ActiveService) *SvcStep {
	s := &SvcStep{r: r, I: i, verb: verb, Name: name, Id: id, Res: steps.ServiceResult{Service: name, Before: id}}
	if as != nil {
		s.Res.SingleWriter = as.Spec.SingleWriter()
	}
	return s
}

// fail journals the step failed with err (a state conflict naming the verb,
// app and service) and diags; dropBinds withdraws the service's binds from
// ACTIVE (withdraw-state), a failure of which becomes a warning.
func (s *SvcStep) Fail(ctx context.Context, err error, diags []string, dropBinds bool) {
	r := s.r
	err = fmt.Errorf("%w: %s %s: service %s: %w", core.ErrConflict, s.verb, r.App, s.Name, err)
	s.Res.Result, s.Res.Error, s.Res.Diagnostics = steps.ResultFailed, err.Error(), diags
	r.Op.Steps[s.I].Diagnostics = diags
	r.SetStep(s.I, core.StepFailed, err.Error())
	if dropBinds {
		if werr := r.E.WithdrawState(ctx, r.App, s.Name); werr != nil {
			s.Res.Warnings = append(s.Res.Warnings, core.Warning{Service: s.Name, Leftover: s.Id, Detail: "drop binds: " + werr.Error()})
		}
	}
	r.Results = append(r.Results, s.Res)
	r.Emit(s.Name, steps.PhaseFailed, err.Error(), true)
}

// succeed journals the step succeeded with after as the serving container.
func (s *SvcStep) Succeed(after string, ep steps.Endpoints, startedAt time.Time) {
	r := s.r
	s.Res.Result, s.Res.After, s.Res.StartedAt = steps.ResultDeployed, after, startedAt
	ep.SetOnResult(&s.Res)
	r.Op.Steps[s.I].After = after
	r.SetStep(s.I, core.StepSucceeded, "")
	r.Results = append(r.Results, s.Res)
	r.Emit(s.Name, steps.PhaseDone, after, true)
}
