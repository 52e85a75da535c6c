package engine_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// One app's unreadable ACTIVE does not stop every app's routing: a deploy
// of another app routes every readable app, keeps the last good routes of
// the unreadable one, and reports it.
func TestRebuild_UnreadableAppKeepsItsLastRoutes(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-blog"}, map[string]map[int]int{"web": {8080: 17000}})
	shop := coretest.WebSpec(0)
	shop.HTTP[0].Host = "shop.example.com"
	h.SeedServing("shop", core.AppSpec{Name: "shop", Services: []core.ServiceSpec{shop}}, map[string]string{"web": "c-shop"}, map[string]map[int]int{"web": {8080: 17001}})
	// Route both once, so the edge holds blog's good routes.
	_, err := h.Engine.Reconcile(h.Ctx(), nil)
	require.NoError(t, err)
	require.Equal(t, []int{17000}, h.LastRoute("blog", "web"))

	h.Store.CorruptActive("blog", errors.New("apps/blog/active.json: unexpected end of JSON input"))
	next := shop
	next.Image = "registry.example/blog:1.5"
	h.Runtime.NextBinds = []map[int]int{{8080: 18090}}
	rev, err := h.Engine.SubmitChecked(h.Ctx(), core.AppSpec{Name: "shop", Services: []core.ServiceSpec{next}}, "sha-shop-2", "")
	require.NoError(t, err)
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "shop", Revision: rev.ID})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, []int{18090}, h.LastRoute("shop", "web"), "the readable app is routed")
	assert.Equal(t, []int{17000}, h.LastRoute("blog", "web"), "the unreadable app keeps its last good routes")
	assert.Contains(t, h.Engine.UnreadableApps(), "blog")

	// A host of the unreadable app is still owned by it.
	taken := coretest.WebSpec(0)
	taken.HTTP[0].Host = "blog.example.com"
	_, err = h.Engine.SubmitChecked(h.Ctx(), core.AppSpec{Name: "other", Services: []core.ServiceSpec{taken}}, "sha-o", "")
	assert.ErrorIs(t, err, core.ErrConflict)
}

// Found by the e2e fault suite: a deploy that switched but could not record
// the verified execution (EIO on recovery.json) must not make the next
// reconcile withdraw the serving container before re-verifying it (that
// dropped requests with 404s): it is verified while it keeps serving.
func TestR41_LostVerificationRecordIsVerifiedBeforeAnyWithdrawal(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18080}}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(depNewWeb(0)), "sha-lost")
	require.NoError(t, err)
	h.Store.FailNext("SaveRecovery", errors.New("EIO"))
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	h.Reset()
	_, err = h.Engine.Reconcile(h.Ctx(), nil)
	require.NoError(t, err)
	assert.Empty(t, h.Withdrawals(), "the serving container was withdrawn")
	assert.Equal(t, []int{18080}, h.LastRoute("blog", "web"))
	rec, err := h.Store.LoadRecovery(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, "c-new", rec.Verified["web"].Container, "the pass re-recorded the verification")
}
