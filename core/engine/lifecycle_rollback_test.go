package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// lcDeployV15 deploys a new revision (image :1.5) over the seeded app.
func lcDeployV15(t *testing.T, h *coretest.Harness) core.Revision {
	t.Helper()
	spec := coretest.WebSpec(0)
	spec.Image = "registry.example/blog:1.5"
	rev, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(spec), "sha-15")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	require.Equal(t, rev.ID, lcActive(t, h, "blog").Services["web"].EffectiveRevision)
	return rev
}

// TestRollback_DeploysPreviousRevisionByPinnedDigest: the default target is
// the revision before the ACTIVE one, deployed with the digest its last
// deploy ran (a moved tag never changes what comes back).
func TestRollback_DeploysPreviousRevisionByPinnedDigest(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	h.SeedOp(core.Operation{ID: "op-0", Kind: core.OpDeploy, App: "blog", Revision: "rev-0", Outcome: core.OutcomeSuccess,
		Steps: []core.Step{{ID: engine.ServiceStepID("web", "replace"), State: core.StepSucceeded, Service: "web",
			Image: "registry.example/blog@sha256:aaa", Digest: "sha256:aaa"}}})
	lcDeployV15(t, h)
	// The tag moved since rev-0 ran.
	h.Runtime.Images = map[string]core.ImageRef{"registry.example/blog:1.4": {Ref: "registry.example/blog@sha256:moved", Digest: "sha256:moved"}}

	res, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog", OpKey: "rb-1"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	web := lcActive(t, h, "blog").Services["web"]
	assert.Equal(t, "sha256:aaa", web.Digest)
	desired, err := h.Store.LoadDesired(context.Background(), "blog")
	require.NoError(t, err)
	assert.Equal(t, web.EffectiveRevision, desired)
	rev, err := h.Store.LoadRevision(context.Background(), "blog", desired)
	require.NoError(t, err)
	assert.Equal(t, "registry.example/blog@sha256:aaa", rev.Spec.Services[0].Image)

	// Replaying the key runs nothing new.
	n := h.Runtime.Calls(coretest.MCreate)
	again, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog", OpKey: "rb-1"})
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Equal(t, n, h.Runtime.Calls(coretest.MCreate))
}

// TestRollback_Refusals: unknown app / revision → not found; nothing
// earlier → conflict.
func TestRollback_Refusals(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	_, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "nope"})
	assert.ErrorIs(t, err, core.ErrNotFound)
	_, err = h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog"})
	assert.ErrorIs(t, err, core.ErrConflict, "only rev-0 exists")
	_, err = h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog", ToRevision: "rev-9"})
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.Zero(t, h.Runtime.Calls(coretest.MCreate))
}

// TestRollback_KeepsReferenceThatStillResolvesToPin: a tag that still
// resolves to the digest the target ran with is kept as written.
func TestRollback_KeepsReferenceThatStillResolvesToPin(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	ref := coretest.ImageRefFor("registry.example/blog:1.4")
	h.SeedOp(core.Operation{ID: "op-0", Kind: core.OpDeploy, App: "blog", Revision: "rev-0", Outcome: core.OutcomeSuccess,
		Steps: []core.Step{{ID: engine.ServiceStepID("web", "replace"), State: core.StepSucceeded, Service: "web",
			Image: ref.Ref, Digest: ref.Digest}}})
	lcDeployV15(t, h)
	res, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog", ToRevision: "rev-0"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	web := lcActive(t, h, "blog").Services["web"]
	assert.Equal(t, ref.Digest, web.Digest)
	rev, err := h.Store.LoadRevision(context.Background(), "blog", web.EffectiveRevision)
	require.NoError(t, err)
	assert.Equal(t, "registry.example/blog:1.4", rev.Spec.Services[0].Image)
	assert.NotEqual(t, "rev-0", rev.ID, "a new revision is stored")
}

// SPEC rollback default: a revision whose deploy failed (it never served)
// is skipped; the default target is the newest earlier revision that
// reached success. --to still names any stored revision.
func TestRollback_DefaultSkipsARevisionThatNeverDeployed(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	h.SeedOp(core.Operation{ID: "op-0", Kind: core.OpDeploy, App: "blog", Revision: "rev-0", Outcome: core.OutcomeSuccess})
	// rev-1 (:1.6) fails its readiness and never serves.
	bad := coretest.WebSpec(0)
	bad.Image = "registry.example/blog:1.6"
	badRev, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(bad), "sha-16")
	require.NoError(t, err)
	h.Prober.SetResult("c-bad", false, "503")
	h.Prober.SetResult("c-bad2", false, "503")
	h.Runtime.NextIDs = []string{"c-bad"}
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: badRev.ID})
	require.Error(t, err)
	// rev-2 (:1.5) deploys fine.
	h.Runtime.NextIDs = nil
	lcDeployV15(t, h)

	res, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	web := lcActive(t, h, "blog").Services["web"]
	rev, err := h.Store.LoadRevision(context.Background(), "blog", web.EffectiveRevision)
	require.NoError(t, err)
	assert.Equal(t, "registry.example/blog:1.4", rev.Spec.Services[0].Image, "rolled back to the failed revision")

	// --to names any revision, also one that never deployed.
	h.Runtime.NextIDs = []string{"c-bad2"}
	_, err = h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog", ToRevision: badRev.ID})
	require.Error(t, err, "its readiness still fails")
	op, err := h.Store.LatestOp(context.Background(), "blog")
	require.NoError(t, err)
	got, err := h.Store.LoadRevision(context.Background(), "blog", op.Revision)
	require.NoError(t, err)
	assert.Equal(t, "registry.example/blog:1.6", got.Spec.Services[0].Image)
}
