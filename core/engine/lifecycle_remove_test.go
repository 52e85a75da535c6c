package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// TestS72_RemoveKeepsStateWhenAPredecessorResists: c-new retired; c-old's
// removal fails → error; markers [c-old]; ACTIVE and the incarnation stay.
func TestS72_RemoveKeepsStateWhenAPredecessorResists(t *testing.T) {
	h := lcSeedPredecessor(t)
	h.Runtime.Fail(coretest.MRemove, "c-old", errors.New("device busy"), 1)
	res, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "c-old")
	assert.False(t, h.Runtime.Exists("c-new"))
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"))
	_, ok := h.Store.Active("blog")
	assert.True(t, ok, "ACTIVE exists")
	assert.Zero(t, h.Events.Count("end-incarnation", ""))
	_, err = h.Store.LoadApp(context.Background(), "blog")
	assert.NoError(t, err, "incarnation not ended")
	op := lcLatest(t, h)
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	assert.Equal(t, core.StepSucceeded, lcStep(t, op, engine.ServiceStepID("web", "remove")).State, "decision 8: per-service steps kept")
	assert.Equal(t, core.StepFailed, lcStep(t, op, engine.StepError).State)
	assert.Equal(t, core.OutcomeFailed, res.Outcome)
}

// TestS73_RemoveInhibitsBeforeRuntimeEffects: intent stopped, removed
// marker, stop, remove, release, clear marker, markers loaded, ownership
// loaded, incarnation ended.
func TestS73_RemoveInhibitsBeforeRuntimeEffects(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	before := h.Store.Calls("LoadMarkers")
	res, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog", OpKey: "rm-1"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, []string{"intent-save blog", "marker-save c-1", "stop c-1", "remove c-1", "claims-release c-1", "marker-clear c-1", "end-incarnation blog"},
		h.Events.Seq("intent-save", "marker-save", "stop", "remove", "claims-release", "marker-clear", "end-incarnation"))
	assert.Equal(t, core.MarkerRemoved, h.Events.Find("marker-save", "c-1")[0].Detail)
	assert.Greater(t, h.Store.Calls("LoadMarkers"), before)
	assert.Equal(t, 1, h.Store.Calls("LoadOwnership"))
	_, err = h.Store.LoadApp(context.Background(), "blog")
	assert.ErrorIs(t, err, core.ErrNotFound)
	arch := h.Store.Archived("blog")
	require.Len(t, arch, 1)
	assert.NotEmpty(t, arch[0].Incarnation, "ownership archived under the old incarnation")
	assert.Empty(t, h.LastRoute("blog", "web"))
	assert.Equal(t, engine.ResultDeployed, lcResult(t, res, "web").Result)

	// The journal survives: a replayed key still replays after the app is gone.
	h.Reset()
	again, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog", OpKey: "rm-1"})
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Empty(t, h.Events.Seq("stop", "remove", "end-incarnation"))
	// Without a key the app is unknown.
	_, err = h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	assert.ErrorIs(t, err, core.ErrNotFound)
}

// TestS74_MissingContainerRemovalIsIdempotent: not-found = gone; release;
// clear; incarnation ended.
func TestS74_MissingContainerRemovalIsIdempotent(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	h.Runtime.Delete("c-1")
	_, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, 1, h.Events.Count("claims-release", "c-1"))
	assert.Empty(t, h.Store.ClaimsOf("c-1"))
	assert.Equal(t, 1, h.Events.Count("marker-clear", "c-1"))
	assert.Equal(t, 1, h.Events.Count("end-incarnation", "blog"))
}

// TestS75_FailedRemovalKeepsClaimsAndActive: removal fails → claims kept,
// ACTIVE kept, error.
func TestS75_FailedRemovalKeepsClaimsAndActive(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	h.Runtime.Fail(coretest.MRemove, "c-1", errors.New("device busy"), 1)
	_, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not confirmed gone")
	assert.Equal(t, []int{17000}, lcClaimPorts(h, "c-1"))
	assert.Equal(t, "c-1", lcActive(t, h, "blog").Services["web"].Container)
	assert.Zero(t, h.Events.Count("end-incarnation", ""))
	assert.Equal(t, []string{"c-1"}, h.Store.MarkerContainers("blog"), "the removed marker stays")
	in, err := h.Store.LoadIntent(context.Background(), "blog")
	require.NoError(t, err)
	assert.True(t, in.Stopped)
	// A later start refuses the container the removed marker inhibits.
	res, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Contains(t, lcResult(t, res, "web").Error, "recovery inhibited")
}

// TestR3_RemoveKeepsVolumesAndSecrets: remove never deletes volumes and
// keeps secrets under the old incarnation; the next incarnation reaches
// the kept volume only by adopting it (R13).
func TestR3_RemoveKeepsVolumesAndSecrets(t *testing.T) {
	h := coretest.NewEngine(t)
	spec := core.ServiceSpec{Name: "db", Image: "registry.example/pg:16", TCP: []core.L4Interface{{Port: 5432}},
		Volumes: []core.VolumeMount{{Name: "data", Path: "/data"}}, Secrets: []core.SecretRef{{Env: "PW", Name: "pw"}}}
	_, err := h.Store.EnsureApp(h.Ctx(), "blog")
	require.NoError(t, err)
	require.NoError(t, h.Store.SetSecret(context.Background(), "blog", "db", "pw", []byte("s3cret")))
	rev, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(spec), "sha", "")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	first := h.Runtime.Created()[0].Name

	_, err = h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, []string{"gordon-blog-data"}, h.Runtime.Volumes(), "the volume survives remove")
	for _, e := range h.Events.Find("remove", "") {
		assert.Equal(t, "", e.Detail, "non-force removal of %s", e.ID)
	}
	require.Len(t, h.Store.Archived("blog"), 1)
	arch := h.Store.Archived("blog")[0]
	assert.Contains(t, arch.Volumes, "gordon-blog-data", "the archived incarnation keeps its volume")
	assert.NotEmpty(t, first)

	// The new incarnation gets the kept volume only by adopting it.
	_, err = h.Store.EnsureApp(h.Ctx(), "blog")
	require.NoError(t, err)
	require.NoError(t, h.Store.SetSecret(context.Background(), "blog", "db", "pw", []byte("n3w")))
	_, err = h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(spec), "sha", "")
	require.ErrorIs(t, err, core.ErrConflict)
	spec.Volumes[0].Adopt = true
	rev, err = h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(spec), "sha", "")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	created := h.Runtime.Created()
	assert.Equal(t, []core.Mount{{Type: core.MountVolume, Source: "gordon-blog-data", Target: "/data"}}, created[len(created)-1].Mounts)
}

// SPEC R55, R5(9): remove retires leftover predecessors with retry-on-leak:
// a failed claim release keeps the marker and fails the remove; the next
// remove releases the claim.
func TestR55_RemoveRetriesALeakedPredecessorClaim(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{}, nil)
	h.Runtime.AddContainer("c-prev", core.ContainerState{}, map[int]int{8080: 17001})
	require.NoError(t, h.Store.RegisterClaims(h.Ctx(), []core.Claim{{Port: 17001, Protocol: "tcp", Owner: core.ClaimOwnerBackend, App: "blog", Container: "c-prev"}}))
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-prev", Reason: core.MarkerRetirementPending, Operation: "op-seed"})
	h.Store.FailNext("ReleaseClaims", errors.New("EIO"))

	_, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	assert.Equal(t, []string{"c-prev"}, h.Store.MarkerContainers("blog"), "the marker stays for the retry")
	assert.Len(t, h.Store.ClaimsOf("c-prev"), 1)

	_, err = h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Empty(t, h.Store.ClaimsOf("c-prev"), "the claim outlived remove")
}

// The same for the serving container: a failed release aborts the remove
// (ACTIVE kept) and the next remove releases the claim.
func TestR55_RemoveRetriesALeakedServingClaim(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-1"}, map[string]map[int]int{"web": {8080: 17000}})
	h.Store.FailNext("ReleaseClaims", errors.New("EIO"))
	_, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	assert.Len(t, h.Store.ClaimsOf("c-1"), 1)
	_, err = h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Empty(t, h.Store.ClaimsOf("c-1"))
}

// SPEC R55: remove reclaims the app's private network.
func TestR55_RemoveReclaimsTheAppNetwork(t *testing.T) {
	h := coretest.NewEngine(t)
	rev, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), "sha", "")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	require.Equal(t, []string{"gordon-blog"}, h.Runtime.Networks())
	_, err = h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Empty(t, h.Runtime.Networks())
	assert.Less(t, h.Events.LastIndex("remove", ""), h.Events.Index("remove-network", "gordon-blog"), "network removed after its containers")
}

// TestR55_RemoveNamesTheVolumesItKept: remove deletes no data (R3); its
// result names every volume the incarnation owned, so the user knows what
// remains and how to delete it.
func TestR55_RemoveNamesTheVolumesItKept(t *testing.T) {
	h := coretest.NewEngine(t)
	web := coretest.WebSpec(0)
	web.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}, {Name: "cache", Path: "/cache"}}
	rev, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(web), "sha", "")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	res, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{engine.VolumeName("blog", "data"), engine.VolumeName("blog", "cache")}, res.KeptVolumes)
}
