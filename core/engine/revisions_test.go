package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// TestRollback_JournaledAsARollbackOfItsTarget: the deploy a rollback
// starts is journaled with verb "rollback" and the revision it returns to
// (kind stays deploy), so `ops` names it a rollback.
func TestRollback_JournaledAsARollbackOfItsTarget(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	h.SeedOp(core.Operation{ID: "op-0", Kind: core.OpDeploy, App: "blog", Revision: "rev-0", Outcome: core.OutcomeSuccess})
	lcDeployV15(t, h)
	res, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog"})
	require.NoError(t, err)
	op := lcLatest(t, h)
	assert.Equal(t, res.Op.ID, op.ID)
	assert.Equal(t, core.OpDeploy, op.Kind)
	assert.Equal(t, core.VerbRollback, op.Verb)
	assert.Equal(t, core.VerbRollback, op.VerbOrKind())
	assert.Equal(t, "rev-0", op.RollbackTo)
	assert.NotEqual(t, "rev-0", op.Revision, "a rollback stores its target as a new revision")
}

// TestRevisions_OutcomeAndServing: every stored revision with the outcome
// of its latest deploy, the verb of that op, and which one serves.
func TestRevisions_OutcomeAndServing(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	h.SeedOp(core.Operation{ID: "op-0", Kind: core.OpDeploy, App: "blog", Revision: "rev-0", Outcome: core.OutcomeSuccess})
	v15 := lcDeployV15(t, h)
	revs, err := h.Engine.Revisions(h.Ctx(), "blog")
	require.NoError(t, err)
	require.Len(t, revs, 2)
	assert.Equal(t, "rev-0", revs[0].Revision)
	assert.Equal(t, "success", revs[0].Outcome)
	assert.False(t, revs[0].Serving)
	assert.Empty(t, revs[0].Services)
	assert.Equal(t, v15.ID, revs[1].Revision)
	assert.Equal(t, "success", revs[1].Outcome)
	assert.Equal(t, core.OpDeploy, revs[1].Verb)
	assert.True(t, revs[1].Serving)
	assert.True(t, revs[1].Desired)
	assert.Equal(t, []string{"web"}, revs[1].Services)

	res, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog"})
	require.NoError(t, err)
	revs, err = h.Engine.Revisions(h.Ctx(), "blog")
	require.NoError(t, err)
	require.Len(t, revs, 3)
	last := revs[2]
	assert.Equal(t, res.Op.Revision, last.Revision)
	assert.Equal(t, core.VerbRollback, last.Verb)
	assert.Equal(t, "rev-0", last.RollbackTo)
	assert.Equal(t, res.Op.ID, last.Op)
	assert.True(t, last.Serving)
	assert.False(t, revs[1].Serving, "exactly one revision serves")

	_, err = h.Engine.Revisions(h.Ctx(), "nope")
	assert.ErrorIs(t, err, core.ErrNotFound)
}

// TestRevisions_NeverDeployedAndFailed: a revision without a deploy op has
// no outcome; a failed deploy's revision shows failed and does not serve.
func TestRevisions_NeverDeployedAndFailed(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	spec := coretest.WebSpec(0)
	spec.Image = "registry.example/blog:1.6"
	rev, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(spec), "sha-16")
	require.NoError(t, err)
	h.SeedOp(core.Operation{ID: "op-1", Kind: core.OpDeploy, App: "blog", Revision: rev.ID, Outcome: core.OutcomeFailed})
	revs, err := h.Engine.Revisions(h.Ctx(), "blog")
	require.NoError(t, err)
	require.Len(t, revs, 2)
	assert.Equal(t, "", revs[0].Outcome, "rev-0 was seeded without a deploy op")
	assert.True(t, revs[0].Serving)
	assert.Equal(t, "failed", revs[1].Outcome)
	assert.False(t, revs[1].Serving)
	assert.True(t, revs[1].Desired)
}

// TestExec_ServingContainerResolvesExactID: exec reaches the container
// ACTIVE names (R2), refuses a stopped app, an unknown service (naming
// the serving ones) and an instance the generation does not have.
func TestExec_ServingContainerResolvesExactID(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	id, _, err := h.Engine.ServingContainer(h.Ctx(), "blog", "web", 1)
	require.NoError(t, err)
	assert.Equal(t, "c-old", id)

	_, _, err = h.Engine.ServingContainer(h.Ctx(), "blog", "db", 1)
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "serving: web")
	_, _, err = h.Engine.ServingContainer(h.Ctx(), "blog", "web", 2)
	assert.ErrorIs(t, err, core.ErrNotFound)
	_, _, err = h.Engine.ServingContainer(h.Ctx(), "blog", "web", 0)
	assert.ErrorIs(t, err, core.ErrInvalid)
	_, _, err = h.Engine.ServingContainer(h.Ctx(), "nope", "web", 1)
	assert.ErrorIs(t, err, core.ErrNotFound)

	require.NoError(t, h.Store.SaveIntent(h.Ctx(), "blog", core.Intent{Stopped: true}))
	_, _, err = h.Engine.ServingContainer(h.Ctx(), "blog", "web", 1)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "docker gordon start blog")
}
