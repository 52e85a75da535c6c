package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core/engine/deploy"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// RollbackRequest is one rollback (ARCHITECTURE §7 `rollback APP [--to REV]`).
type RollbackRequest struct {
	// App is the app name (required).
	App string
	// ToRevision is the revision to go back to (any stored one); "" means
	// the latest revision created before the current ACTIVE one whose
	// manifest differs from it and that reached success (so a revision
	// whose deploy failed is never the default, and a second rollback
	// returns to where the first started, like `cd -`).
	ToRevision string
	// OpKey is the deploy's idempotency key (R6).
	OpKey string
	// Pull is the pull policy (decision 15); "" = missing.
	Pull string
	// WithData restores, in the sequential replacement of each service
	// with volumes, the snapshot taken before the deploy being rolled back
	// (refused before anything changes when one has none).
	WithData bool
}

// Rollback deploys an earlier revision by its pinned digests. The target's
// spec is stored as a NEW revision (same source sha256). Pinning: for each
// service, the runtime image the target revision last ran with is the
// `Image`/`Digest` (repo@digest, or the local image ID) of the latest
// succeeded `service.<name>.replace` step of a deploy of that revision,
// else of an ACTIVE record still at that revision. When the reference as
// written still resolves to that digest it is kept (so an unchanged
// service stays unchanged, R15); otherwise (the tag moved) the image is
// replaced by the pinned runtime image. A service with no such history
// keeps the revision's image as written. The new revision becomes DESIRED
// and is deployed with Deploy (both phases, R12), so every deploy rule
// applies (overlap/sequential, readiness, journal). A repeated OpKey
// replays the deploy it started, without recomputing the target.
//
// Errors: empty app → ErrInvalid; unknown app or --to revision →
// ErrNotFound; never deployed, or no earlier revision → ErrConflict; then
// whatever Deploy returns (the result is non-nil once an op was claimed).
func (e *Engine) Rollback(ctx context.Context, req RollbackRequest) (*deploy.DeployResult, error) {
	app := req.App
	if app == "" {
		return nil, fmt.Errorf("%w: rollback: no app given", core.ErrInvalid)
	}
	if err := e.RequireLiveTraffic(ctx, "rollback"); err != nil {
		return nil, err
	}
	if _, err := e.Store.LoadApp(ctx, app); err != nil {
		if errors.Is(err, core.ErrNotFound) {
			return nil, fmt.Errorf("%w: rollback: unknown app %q", core.ErrNotFound, app)
		}
		return nil, fmt.Errorf("rollback %s: load app: %w", app, err)
	}
	ops, err := e.Store.ListOps(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("rollback %s: list operations: %w", app, err)
	}
	if req.OpKey != "" {
		// A repeated key replays the rollback's deploy (R6, R8): the target is
		// not recomputed, since the rollback itself moved ACTIVE.
		for _, op := range ops {
			if op.Key == req.OpKey {
				return e.Deploy(ctx, deploy.DeployRequest{App: app, Revision: op.Revision, OpKey: req.OpKey, Pull: req.Pull, Verb: core.VerbRollback, RollbackTo: op.RollbackTo})
			}
		}
	}
	active, err := e.activeOrNeverDeployed(ctx, "rollback", app)
	if err != nil {
		return nil, err
	}
	revs, err := e.Store.ListRevisions(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("rollback %s: list revisions: %w", app, err)
	}
	sort.SliceStable(revs, func(i, j int) bool { return revs[i].CreatedAt.Before(revs[j].CreatedAt) })
	target, err := rollbackTarget(app, revs, currentRevision(active, revs), req.ToRevision, succeededRevisions(ops, active))
	if err != nil {
		return nil, err
	}
	restore, notes, err := e.rollbackData(app, active, req.WithData)
	if err != nil {
		return nil, err
	}
	spec := e.pinnedSpec(ctx, target, ops, active)
	e.Emit(steps.ProgressEvent{App: app, Phase: steps.PhaseResolve, Detail: "rollback to " + target.ID})
	rev, err := e.SubmitRevision(ctx, spec, target.SourceSHA256)
	if err != nil {
		return nil, fmt.Errorf("rollback %s to %s: %w", app, target.ID, err)
	}
	return e.Deploy(ctx, deploy.DeployRequest{App: app, Revision: rev.ID, OpKey: req.OpKey, Pull: req.Pull, Verb: core.VerbRollback, RollbackTo: target.ID,
		RestoreData: restore, Warnings: notes})
}

// pinnedSpec returns a copy of rev's spec whose images are pinned to the
// runtime images rev last ran with (pinnedImages); a reference that still
// resolves to the pinned digest is kept as written, so an unchanged
// service stays unchanged (R15).
func (e *Engine) pinnedSpec(ctx context.Context, rev core.Revision, ops []core.Operation, active core.Active) core.AppSpec {
	pins := pinnedImages(rev.ID, ops, active)
	spec := rev.Spec
	spec.Services = append([]core.ServiceSpec(nil), rev.Spec.Services...)
	for i := range spec.Services {
		p, ok := pins[spec.Services[i].Name]
		if !ok {
			continue
		}
		if cur, err := e.Runtime.ResolveImage(ctx, spec.Services[i].Image); err == nil && p.Digest != "" && cur.Digest == p.Digest {
			continue
		}
		spec.Services[i].Image = p.Ref
	}
	return spec
}

// currentRevision is the revision ACTIVE serves: the converged revision,
// else the most recently created effective revision among its services.
func currentRevision(active core.Active, revs []core.Revision) string {
	if active.Converged && active.ConvergedRevision != "" {
		return active.ConvergedRevision
	}
	eff := map[string]bool{}
	for _, s := range active.Services {
		if s != nil {
			eff[s.EffectiveRevision] = true
		}
	}
	cur := ""
	for _, r := range revs {
		if eff[r.ID] {
			cur = r.ID
		}
	}
	return cur
}

// succeededRevisions is the set of revision ids that reached success: a
// deploy op of it ended in success, or ACTIVE is converged at it.
func succeededRevisions(ops []core.Operation, active core.Active) map[string]bool {
	ok := map[string]bool{}
	for _, op := range ops {
		if op.Kind == core.OpDeploy && op.Outcome == core.OutcomeSuccess && op.Revision != "" {
			ok[op.Revision] = true
		}
	}
	if active.Converged && active.ConvergedRevision != "" {
		ok[active.ConvergedRevision] = true
	}
	return ok
}

// rollbackTarget picks the revision to roll back to (see RollbackRequest):
// to when given (any stored revision), else the newest revision before
// current whose manifest differs from it and that reached success (its own
// deploy, or one of a revision with the same manifest) per succeeded.
func rollbackTarget(app string, revs []core.Revision, current, to string, succeeded map[string]bool) (core.Revision, error) {
	if to != "" {
		for _, r := range revs {
			if r.ID == to {
				return r, nil
			}
		}
		return core.Revision{}, fmt.Errorf("%w: rollback %s: no revision %q", core.ErrNotFound, app, to)
	}
	idx := -1
	for i, r := range revs {
		if r.ID == current {
			idx = i
		}
	}
	if idx < 0 {
		return core.Revision{}, fmt.Errorf("%w: rollback %s: ACTIVE revision %q is not stored", core.ErrConflict, app, current)
	}
	cur := revs[idx]
	reached := func(r core.Revision) bool {
		for _, o := range revs {
			if succeeded[o.ID] && sameManifest(o, r) {
				return true
			}
		}
		return false
	}
	skipped := 0
	for i := idx - 1; i >= 0; i-- {
		if sameManifest(revs[i], cur) {
			continue
		}
		if reached(revs[i]) {
			return revs[i], nil
		}
		skipped++
	}
	if skipped > 0 {
		return core.Revision{}, fmt.Errorf("%w: rollback %s: no revision before %s ever deployed successfully (%d never did; name one with --to)", core.ErrConflict, app, current, skipped)
	}
	return core.Revision{}, fmt.Errorf("%w: rollback %s: no revision before %s to roll back to", core.ErrConflict, app, current)
}

// sameManifest compares source checksums when both have one, else specs.
func sameManifest(a, b core.Revision) bool {
	if a.SourceSHA256 != "" && b.SourceSHA256 != "" {
		return a.SourceSHA256 == b.SourceSHA256
	}
	return deploy.DpSameJSON(a.Spec, b.Spec)
}

// pinnedImages returns service → the runtime image (Ref) and digest rev
// last ran with: succeeded replace steps of deploys of rev (later ops win),
// then ACTIVE records still at rev.
func pinnedImages(rev string, ops []core.Operation, active core.Active) map[string]core.ImageRef {
	pins := map[string]core.ImageRef{}
	for _, op := range ops {
		if op.Kind != core.OpDeploy || op.Revision != rev {
			continue
		}
		for _, s := range op.Steps {
			if s.Service != "" && s.State == core.StepSucceeded && s.Image != "" && strings.HasSuffix(s.ID, ".replace") {
				pins[s.Service] = core.ImageRef{Ref: s.Image, Digest: s.Digest}
			}
		}
	}
	for name, s := range active.Services {
		if s != nil && s.EffectiveRevision == rev && s.Image != "" {
			pins[name] = core.ImageRef{Ref: s.Image, Digest: s.Digest}
		}
	}
	return pins
}
