// Package retention chooses which of an app's ops and revisions a prune
// removes (docs/security.md "The state directory"): the stores
// (journal.Store.Prune, the in-memory store) apply its choice.
package retention

import (
	"cmp"
	"slices"

	"github.com/gordon-deploy/docker-gordon/core"
)

// The default retention per app: the newest DefaultOps ops and the newest
// DefaultRevisions revisions (plus every revision still named).
const (
	DefaultOps       = 100
	DefaultRevisions = 50
)

// JobRuns is how many finished runs of each scheduled job a prune keeps
// (ops of kind "job", core/engine/jobs); they do not count against
// keepOps, so a frequent job does not push the deploys out.
const JobRuns = 20

// Select returns the ids of the ops and revisions of one app that a prune
// keeping keepOps ops and keepRevisions revisions removes, oldest first.
//
//   - ops are ordered oldest first (StartedAt, then id, as ListOps);
//     everything but the newest keepOps is removed, except an unfinished op
//     (not terminal: reconciliation still needs it) and latest (the op the
//     store names as the app's latest);
//   - revisions are ordered as given (oldest first, as ListRevisions);
//     everything but the newest keepRevisions is removed, except a
//     revision named by desired, by active (its converged revision or a
//     service's effective revision) or by a kept op (its revision, its
//     rollback target, or the revision an automatic rollback restored).
//
// A job's runs are bounded apart (JobRuns per job, when keepOps > 0).
// keepOps or keepRevisions of 0 or less keeps every record of that kind.
func Select(ops []core.Operation, revs []core.Revision, latest, desired string, active core.Active, keepOps, keepRevisions int) (opIDs, revIDs []string) {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b core.Operation) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	named := map[string]bool{desired: true, active.ConvergedRevision: true}
	for _, s := range active.Services {
		if s != nil {
			named[s.EffectiveRevision] = true
		}
	}
	// rank is each op's place from the newest among the ops bounded with
	// it: a job's runs, or every other op.
	rank, seen := make([]int, len(ops)), map[string]int{}
	for i := len(ops) - 1; i >= 0; i-- {
		k := jobOf(ops[i])
		rank[i] = seen[k]
		seen[k]++
	}
	for i, op := range ops {
		bound := keepOps
		if jobOf(op) != "" {
			bound = JobRuns
		}
		if keepOps > 0 && rank[i] >= bound && op.Terminal() && op.ID != latest {
			opIDs = append(opIDs, op.ID)
			continue
		}
		named[op.Revision], named[op.RollbackTo] = true, true
		for _, st := range op.Steps {
			if st.Rollback != nil {
				named[st.Rollback.RestoredRevision] = true
			}
		}
	}
	if keepRevisions <= 0 {
		return opIDs, nil
	}
	for i, r := range revs {
		if i < len(revs)-keepRevisions && !named[r.ID] {
			revIDs = append(revIDs, r.ID)
		}
	}
	return opIDs, revIDs
}

// jobOf is the job a run of a scheduled job ran ("" for other ops).
func jobOf(op core.Operation) string {
	if op.Kind != "job" || len(op.Steps) == 0 {
		return ""
	}
	return op.Steps[0].ID
}
