package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// RevisionInfo is one stored revision as `docker gordon revisions` shows
// it.
type RevisionInfo struct {
	// Revision is the revision id ("rev-3").
	Revision  string    `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	// SourceSHA256 is the hex sha256 of the manifest it came from.
	SourceSHA256 string `json:"source_sha256,omitempty"`
	// Outcome is the outcome of the latest deploy op of this revision
	// (success, partial, failed); "pending" while that op is not terminal;
	// "" when no deploy of it was journaled.
	Outcome string `json:"outcome,omitempty"`
	// Op is that latest deploy op's id, and Verb its verb (deploy or
	// rollback).
	Op   string `json:"op,omitempty"`
	Verb string `json:"verb,omitempty"`
	// RollbackTo is, for a revision a rollback stored, the revision it
	// copies.
	RollbackTo string `json:"rollback_to,omitempty"`
	// Serving is true for the revision ACTIVE serves: the converged
	// revision, else the newest revision some service runs.
	Serving bool `json:"serving"`
	// Services are the services whose serving generation runs this
	// revision (ACTIVE's effective revision), sorted.
	Services []string `json:"services,omitempty"`
	// Desired is true for the revision DESIRED names.
	Desired bool `json:"desired,omitempty"`
}

// OutcomePending is RevisionInfo.Outcome while its op is not terminal.
const OutcomePending = "pending"

// Revisions lists app's stored revisions, oldest first, each with the
// outcome of its latest deploy op and whether it serves (ARCHITECTURE §7,
// `docker gordon revisions APP`). It reads only; no lock is taken.
// Errors: an unknown app wraps ErrNotFound; store errors as is.
func (e *Engine) Revisions(ctx context.Context, app string) ([]RevisionInfo, error) {
	if _, err := e.Store.LoadApp(ctx, app); err != nil {
		if errors.Is(err, core.ErrNotFound) {
			return nil, fmt.Errorf("%w: app %q not found (deploy it with: docker gordon deploy -f FILE)", core.ErrNotFound, app)
		}
		return nil, fmt.Errorf("app %s: %w", app, err)
	}
	revs, err := e.Store.ListRevisions(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("app %s: list revisions: %w", app, err)
	}
	sort.SliceStable(revs, func(i, j int) bool { return revs[i].CreatedAt.Before(revs[j].CreatedAt) })
	ops, err := e.Store.ListOps(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("app %s: list operations: %w", app, err)
	}
	active, err := e.LoadActive(ctx, app)
	if err != nil {
		return nil, err
	}
	desired, _ := e.Store.LoadDesired(ctx, app)
	serving := currentRevision(active, revs)
	byRev := map[string][]string{}
	for name, s := range active.Services {
		if s != nil && s.Container != "" {
			byRev[s.EffectiveRevision] = append(byRev[s.EffectiveRevision], name)
		}
	}
	latest := map[string]core.Operation{}
	for _, op := range ops {
		if op.Kind == core.OpDeploy && op.Revision != "" {
			latest[op.Revision] = op // ListOps is oldest first: later wins.
		}
	}
	out := make([]RevisionInfo, 0, len(revs))
	for _, r := range revs {
		ri := RevisionInfo{Revision: r.ID, CreatedAt: r.CreatedAt, SourceSHA256: r.SourceSHA256,
			Serving: r.ID == serving && len(byRev[r.ID]) > 0, Desired: r.ID == desired}
		if op, ok := latest[r.ID]; ok {
			ri.Op, ri.Verb, ri.RollbackTo = op.ID, op.VerbOrKind(), op.RollbackTo
			ri.Outcome = string(op.Outcome)
			if !op.Terminal() {
				ri.Outcome = OutcomePending
			}
		}
		ri.Services = byRev[r.ID]
		sort.Strings(ri.Services)
		out = append(out, ri)
	}
	return out, nil
}
