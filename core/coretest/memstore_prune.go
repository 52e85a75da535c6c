package coretest

import (
	"context"
	"slices"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/retention"
)

// Prune implements core.Store with retention.Select (event journal-prune
// per removed id).
func (s *MemStore) Prune(ctx context.Context, app string, keepOps, keepRevisions int) ([]string, []string, error) {
	if err := s.enter("Prune"); err != nil {
		return nil, nil, err
	}
	defer s.mu.Unlock()
	ops, revs := retention.Select(s.ops[app], s.revs[app], s.latest[app], s.desired[app], s.active[app], keepOps, keepRevisions)
	s.ops[app] = slices.DeleteFunc(s.ops[app], func(o core.Operation) bool { return slices.Contains(ops, o.ID) })
	s.revs[app] = slices.DeleteFunc(s.revs[app], func(r core.Revision) bool { return slices.Contains(revs, r.ID) })
	for _, id := range append(slices.Clone(ops), revs...) {
		s.ev.AddDetail("journal-prune", app, id)
	}
	s.ok("Prune")
	return ops, revs, nil
}
