package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Pull policies (decision 15).
const (
	PullAlways  = "always"
	PullMissing = "missing"
	PullNever   = "never"
)

// DeployRequest is one deploy (SPEC R12).
type DeployRequest struct {
	// App is the app name (required).
	App string
	// Revision is the revision id to deploy; "" means DESIRED.
	Revision string
	// Services restricts the deploy to these services (--service, targeted
	// deploy, decision 14): no dropped-service removal. Empty = full deploy.
	Services []string
	// OpKey is the caller's idempotency key (R6); "" generates an op id.
	OpKey string
	// Pull is always, missing (default when "") or never (decision 15).
	Pull string
	// DryRun only plans (Deploy returns the plan, no claim, no effect).
	DryRun bool
	// Spec, when set, is planned instead of a stored revision (PlanDeploy
	// and DryRun only: `deploy -f FILE --dry-run` stores nothing). The plan
	// names its revision "(unsaved)". Deploy without DryRun refuses it.
	Spec *core.AppSpec
	// Verb is journaled as Operation.Verb ("" = deploy; Rollback sets
	// "rollback", Scale "scale"), and RollbackTo as Operation.RollbackTo.
	Verb       string
	RollbackTo string
	// RestoreData: service → snapshot (rollback --with-data); Warnings: app-level.
	RestoreData map[string]string
	Warnings    []core.Warning
	// Submit, when set, is a manifest Deploy checks (CheckDeployable) and
	// stores as the app's new revision under the deploy's own app lock,
	// then deploys (deploy -f): one lock, each check once. Revision must
	// be "".
	Submit *Submission

	// lockWait is how long Deploy waited for the app lock; journaled as the
	// preflight step's "lock" phase, so deploy latency splits by phase.
	lockWait time.Duration
	// held is the memo of checks of the lock hold Deploy took.
	held *steps.HeldChecks
}

// UnsavedRevision is the revision id a plan of DeployRequest.Spec shows.
const UnsavedRevision = "(unsaved)"

// SubmitRevision stores spec as a new immutable revision of its app and
// points DESIRED at it (SPEC 1.1 "DESIRED / revision"). When DESIRED
// already holds an identical spec with the same source sha256 it is
// returned unchanged (so a repeated `deploy -f` with an op key replays).
// It creates the app (fresh incarnation) when absent and holds the app
// lock briefly. Errors: empty name wraps ErrInvalid; store errors as is.
func (e *Engine) SubmitRevision(ctx context.Context, spec core.AppSpec, sourceSHA256 string) (core.Revision, error) {
	app := spec.Name
	if app == "" {
		return core.Revision{}, fmt.Errorf("%w: app spec has no name", core.ErrInvalid)
	}
	lk, err := e.Lock(ctx, app, "submit", "")
	if err != nil {
		return core.Revision{}, fmt.Errorf("app %s: %w", app, err)
	}
	defer lk.Unlock()
	return e.storeRevision(ctx, spec, sourceSHA256)
}

// storeRevision is SubmitRevision's body; the caller holds the app lock.
func (e *Engine) storeRevision(ctx context.Context, spec core.AppSpec, sourceSHA256 string) (core.Revision, error) {
	app := spec.Name
	if _, err := e.Store.EnsureApp(ctx, app); err != nil {
		return core.Revision{}, fmt.Errorf("app %s: %w", app, err)
	}
	if err := e.storeConfigFiles(ctx, spec); err != nil {
		return core.Revision{}, fmt.Errorf("app %s: %w", app, err)
	}
	if id, err := e.Store.LoadDesired(ctx, app); err == nil && id != "" {
		if cur, err := e.Store.LoadRevision(ctx, app, id); err == nil && cur.SourceSHA256 == sourceSHA256 && DpSameJSON(cur.Spec, spec) {
			return cur, nil
		}
	}
	id, err := e.Store.NextRevisionID(ctx, app)
	if err != nil {
		return core.Revision{}, fmt.Errorf("app %s: new revision id: %w", app, err)
	}
	rev := core.Revision{ID: id, App: app, Spec: spec, SourceSHA256: sourceSHA256, CreatedAt: e.Now()}
	if err := e.Store.SaveRevision(ctx, rev); err != nil {
		return core.Revision{}, fmt.Errorf("app %s: save revision %s: %w", app, id, err)
	}
	if err := e.Store.SaveDesired(ctx, app, id); err != nil {
		return core.Revision{}, fmt.Errorf("app %s: save DESIRED %s: %w", app, id, err)
	}
	return rev, nil
}

func DpSameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// Deploy runs both deploy phases synchronously (SPEC R12) under the app
// lock: start phase (store self-recovery, interrupted-op reconciliation,
// revision resolution, targeted checks, claim with `preflight` pending,
// live mark) then execute phase (preflight R13, dropped services R56, one
// service step per pinned service in name order R14–R22, outcome R9,
// warnings R10). A DryRun only plans (see PlanDeploy). Under the lock and
// before the start phase it requires a live edge (R68) and, with Submit,
// runs the submission's checks and stores its revision (deploy -f): one
// lock hold, each check asked once (heldChecks).
//
// It returns the result (non-nil whenever an op was claimed or replayed)
// and: nil on success; on a replayed key the R8 disposition; on a failed
// service an error wrapping ErrConflict that names the service, the step
// and the cause (R14.4); refusals (lock, R7, unknown revision or service,
// invalid pull policy) before any claim. The op is journaled either way.
func (e *Engine) Deploy(ctx context.Context, req DeployRequest) (res *DeployResult, err error) {
	if req.App == "" {
		return nil, fmt.Errorf("%w: deploy: no app given", core.ErrInvalid)
	}
	switch req.Pull {
	case "", PullAlways, PullMissing, PullNever:
	default:
		return nil, fmt.Errorf("%w: deploy %s: pull policy %q: want always, missing or never", core.ErrInvalid, req.App, req.Pull)
	}
	if req.Spec != nil && !req.DryRun {
		return nil, fmt.Errorf("%w: deploy %s: an unsaved spec can only be planned (submit it with SubmitRevision first)", core.ErrInvalid, req.App)
	}
	if req.DryRun {
		p, err := e.PlanDeploy(ctx, req)
		if err != nil {
			return nil, err
		}
		return &DeployResult{Plan: &p}, nil
	}
	if req.Submit != nil && (req.Submit.Spec.Name != req.App || req.Revision != "") {
		return nil, fmt.Errorf("%w: deploy %s: a submitted manifest must name the app (it names %q) and no revision", core.ErrInvalid, req.App, req.Submit.Spec.Name)
	}
	lockStart := time.Now()
	lk, err := e.Lock(ctx, req.App, core.OpDeploy, "")
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %w", req.App, err)
	}
	req.lockWait = time.Since(lockStart)
	req.held = lk.Checks
	// R68 under the lock: its answer is the preflight's traffic check too
	// (heldChecks); a refusal has changed nothing.
	if err := e.RequireLiveTrafficFor(ctx, req.held, "deploy"); err != nil {
		lk.Unlock()
		return nil, err
	}
	if req.Submit != nil {
		if req.Revision, err = e.submitLocked(ctx, req); err != nil {
			lk.Unlock()
			return nil, err
		}
	}
	// Deferred before the unlock, so it runs after it: the outcome is
	// journaled and the lock free when the webhook is called.
	var notifyID string
	defer func() {
		if notifyID != "" {
			e.notifyDeploy(ctx, req.App, notifyID, res, err)
		}
	}()
	defer lk.Unlock()
	op, claimed, err := e.startDeploy(ctx, req)
	if !claimed {
		if op.ID == "" {
			return nil, err
		}
		return replayResult(op), err
	}
	notifyID = op.ID
	res, err = e.executeDeploy(ctx, req, op.ID)
	e.SetLive(req.App, "")
	if res == nil || !res.Op.Terminal() {
		// R12: a claim owned but never executed to a terminal outcome is
		// abandoned: reconcile it under the lock we still hold.
		if rerr := e.reconcileLatest(context.WithoutCancel(ctx), req.App, ""); rerr != nil {
			e.Log().Warn("reconcile abandoned deploy", "app", req.App, "op", op.ID, "error", rerr)
		}
	}
	return res, err
}

// startDeploy is R12's start phase; the caller holds the app lock. claimed
// is false for a refusal (zero op) or a replay (stored op).
func (e *Engine) startDeploy(ctx context.Context, req DeployRequest) (core.Operation, bool, error) {
	app := req.App
	if err := e.Store.Recover(ctx); err != nil {
		return core.Operation{}, false, fmt.Errorf("deploy %s: store self-recovery: %w", app, err)
	}
	if err := e.reconcileLatest(ctx, app, e.LiveOp(app)); err != nil {
		return core.Operation{}, false, fmt.Errorf("deploy %s: reconcile interrupted operation: %w", app, err)
	}
	rev, err := e.resolveRevision(ctx, app, req.Revision)
	if err != nil {
		return core.Operation{}, false, err
	}
	if err := checkTargets(rev, req.Services); err != nil {
		return core.Operation{}, false, err
	}
	pull := req.Pull
	if pull == "" {
		pull = PullMissing
	}
	now := e.Now()
	op := core.Operation{
		ID:          e.NextOpID(),
		Kind:        core.OpDeploy,
		Verb:        req.Verb,
		RollbackTo:  req.RollbackTo,
		App:         app,
		Key:         req.OpKey,
		Fingerprint: steps.Fingerprint(core.OpDeploy, app, rev.ID, steps.SortedJoin(req.Services), pull),
		Revision:    rev.ID,
		StartedAt:   now,
		Steps:       []core.Step{{ID: steps.StepPreflight, State: core.StepPending, StartedAt: now, UpdatedAt: now}},
	}
	stored, claimed, err := e.ClaimOp(ctx, op)
	if err != nil || !claimed {
		return stored, false, err
	}
	e.SetLive(app, stored.ID)
	return stored, true, nil
}

// replayResult is the stored projection of a replayed op (R8).
func replayResult(op core.Operation) *DeployResult {
	r := &DeployResult{Op: op, Outcome: op.Outcome, Warnings: op.Warnings, Replayed: true}
	for _, s := range op.Steps {
		if s.Service == "" || steps.IsSubStep(s.ID) {
			continue
		}
		sr := steps.ServiceResult{Service: s.Service, Before: s.Before, After: s.After, Error: s.Error, Diagnostics: s.Diagnostics}
		switch {
		case s.State == core.StepFailed:
			sr.Result = steps.ResultFailed
		case s.State != core.StepSucceeded:
			sr.Result = ""
		case s.Result != "":
			sr.Result = steps.Result(s.Result)
			if sr.Result == steps.ResultUnchanged {
				sr.Flow = steps.FlowUnchanged
			}
		// Journals written before Step.Result: derive it from ID and Detail.
		case strings.HasSuffix(s.ID, ".remove"):
			sr.Result = steps.ResultRemoved
		case strings.HasPrefix(s.Detail, "unchanged"):
			sr.Result, sr.Flow = steps.ResultUnchanged, steps.FlowUnchanged
		default:
			sr.Result = steps.ResultDeployed
		}
		r.Services = append(r.Services, sr)
	}
	return r
}

// resolveRevision loads revision id, or DESIRED's revision when id is "".
// Errors wrap ErrNotFound when the app has no such revision.
func (e *Engine) resolveRevision(ctx context.Context, app, id string) (core.Revision, error) {
	if id == "" {
		d, err := e.Store.LoadDesired(ctx, app)
		if err != nil {
			return core.Revision{}, fmt.Errorf("app %s: load DESIRED: %w", app, err)
		}
		id = d
	}
	rev, err := e.Store.LoadRevision(ctx, app, id)
	if err != nil {
		return core.Revision{}, fmt.Errorf("app %s: load revision %s: %w", app, id, err)
	}
	if rev.App == "" {
		rev.App = app
	}
	return rev, nil
}

// checkTargets is the targeted-deploy check (R12 [C]): every named service
// must be declared by the revision (ErrInvalid otherwise).
func checkTargets(rev core.Revision, services []string) error {
	for _, s := range services {
		if _, ok := rev.Spec.Service(s); !ok {
			return fmt.Errorf("%w: app %s: revision %s declares no service %q", core.ErrInvalid, rev.App, rev.ID, s)
		}
	}
	return nil
}

// loadActive loads ACTIVE(app); absent → an empty record.
func (e *Engine) LoadActive(ctx context.Context, app string) (core.Active, error) {
	a, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		return core.Active{App: app, Services: map[string]*core.ActiveService{}}, nil
	}
	if err != nil {
		return core.Active{}, fmt.Errorf("app %s: load ACTIVE: %w", app, err)
	}
	if a.App == "" {
		a.App = app
	}
	if a.Services == nil {
		a.Services = map[string]*core.ActiveService{}
	}
	return a, nil
}

// DeployResult is the outcome of Deploy.
type DeployResult struct {
	// Op is the journaled operation as last saved (zero for a dry run).
	Op core.Operation `json:"op"`
	// Services holds one result per pinned (and dropped) service.
	Services []steps.ServiceResult `json:"services"`
	// Outcome is success, partial or failed (R9); "" for a dry run.
	Outcome core.Outcome `json:"outcome,omitempty"`
	// Warnings are the journal warnings (R10).
	Warnings []core.Warning `json:"warnings,omitempty"`
	// Plan is what the deploy decided (always set for a dry run).
	Plan *Plan `json:"plan,omitempty"`
	// Replayed is true when OpKey named an existing op (R6, R8): nothing ran.
	Replayed bool `json:"replayed,omitempty"`
}

// notifyDeploy notifies the outcome of the deploy op id (a rollback's
// too): res's op when terminal, else the op as the store has it once
// reconciliation finalized it.
func (e *Engine) notifyDeploy(ctx context.Context, app, id string, res *DeployResult, opErr error) {
	if res != nil && res.Op.Terminal() {
		e.NotifyOp(ctx, res.Op, opErr)
		return
	}
	if op, err := e.Store.LoadOp(context.WithoutCancel(ctx), app, id); err == nil {
		e.NotifyOp(ctx, op, opErr)
	}
}
