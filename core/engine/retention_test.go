package engine_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// TestRetention_AppliedAfterEveryOp: with a retention of 2 ops and 2
// revisions, six deploys leave the newest 2 ops, and the revisions DESIRED
// and ACTIVE name among the newest kept; the history stops growing.
func TestRetention_AppliedAfterEveryOp(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Engine.Retention = engine.Retention{Ops: 2, Revisions: 2}
	var last string
	for i := 1; i <= 6; i++ {
		web := coretest.WebSpec(0)
		web.Env = map[string]string{"N": fmt.Sprint(i)}
		rev, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(web), fmt.Sprintf("sha-%d", i))
		require.NoError(t, err)
		res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
		require.NoError(t, err)
		require.Equal(t, core.OutcomeSuccess, res.Outcome)
		last = rev.ID
		ops, err := h.Store.ListOps(h.Ctx(), "blog")
		require.NoError(t, err)
		assert.LessOrEqual(t, len(ops), 2, "after deploy %d", i)
		revs, err := h.Store.ListRevisions(h.Ctx(), "blog")
		require.NoError(t, err)
		assert.LessOrEqual(t, len(revs), 2, "after deploy %d", i)
	}
	desired, err := h.Store.LoadDesired(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, last, desired)
	_, err = h.Store.LoadRevision(h.Ctx(), "blog", desired)
	require.NoError(t, err, "DESIRED's revision is kept")
	active, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	_, err = h.Store.LoadRevision(h.Ctx(), "blog", active.Services["web"].EffectiveRevision)
	require.NoError(t, err, "ACTIVE's revision is kept")
}

// TestRetention_PruneKeepsEverythingAtZero: the zero retention keeps every
// op and revision; Prune applies the configured one on demand.
func TestRetention_PruneKeepsEverythingAtZero(t *testing.T) {
	h := coretest.NewEngine(t)
	for i := 1; i <= 3; i++ {
		web := coretest.WebSpec(0)
		web.Env = map[string]string{"N": fmt.Sprint(i)}
		_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(web), fmt.Sprintf("sha-%d", i))
		require.NoError(t, err)
		_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
		require.NoError(t, err)
	}
	ops, err := h.Store.ListOps(h.Ctx(), "blog")
	require.NoError(t, err)
	require.Len(t, ops, 3)
	revs, err := h.Store.ListRevisions(h.Ctx(), "blog")
	require.NoError(t, err)
	require.Len(t, revs, 3)
	h.Engine.Retention = engine.Retention{Ops: 1, Revisions: 1}
	prunedOps, prunedRevs, err := h.Engine.Prune(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, []string{ops[0].ID, ops[1].ID}, prunedOps)
	assert.Equal(t, []string{revs[0].ID, revs[1].ID}, prunedRevs)
}
