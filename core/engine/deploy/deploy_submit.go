package deploy

import (
	"context"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
)

// Submission is a manifest that Deploy checks and stores as the app's new
// revision under the same app lock it deploys under (DeployRequest.Submit;
// `deploy -f`), so the checks, the store and the deploy share one hold of
// the lock and its memo of checks.
type Submission struct {
	// Spec is the manifest (its Name is the app); SourceSHA256 the
	// source's hash (SubmitRevision).
	Spec         core.AppSpec
	SourceSHA256 string
	// Prepare, if set, runs under the lock after the edge check and before
	// CheckDeployable (the CLI: image-config checks, storing a compose
	// project's secrets). Its error refuses the deploy as is.
	Prepare func(ctx context.Context) error
	// Stored, if set, is told the revision stored (or the unchanged
	// DESIRED one) before the deploy's op is claimed.
	Stored func(core.Revision)
}

// submitLocked runs req.Submit's Prepare, CheckDeployable and stores its
// spec as a revision; the caller holds the app lock (so every check is
// asked once, heldChecks). A refusal stores nothing. It returns the
// revision id.
func (e *Engine) submitLocked(ctx context.Context, req DeployRequest) (string, error) {
	sub := req.Submit
	ctx = steps.WithHeld(ctx, req.held)
	if sub.Prepare != nil {
		if err := sub.Prepare(ctx); err != nil {
			return "", err
		}
	}
	if err := e.CheckDeployable(ctx, sub.Spec, req.Pull); err != nil {
		return "", err
	}
	rev, err := e.storeRevision(ctx, sub.Spec, sub.SourceSHA256)
	if err != nil {
		return "", fmt.Errorf("app %s: %w", req.App, err)
	}
	if sub.Stored != nil {
		sub.Stored(rev)
	}
	return rev.ID, nil
}
