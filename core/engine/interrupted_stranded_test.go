package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// A sequential replacement crashed after writing replacement-pending for the
// old single-writer generation and before creating a candidate (found by the
// crash-at-every-boundary e2e test): reconciliation clears the stranded
// marker and finalizes the op, so the pass verifies and routes the old
// generation again instead of refusing it forever.
func TestR47_StrandedReplacementMarkerClearedWhenNoCandidate(t *testing.T) {
	for _, oldRunning := range []bool{true, false} {
		name := "old-running"
		if !oldRunning {
			name = "old-removed"
		}
		t.Run(name, func(t *testing.T) {
			h := coretest.NewEngine(t)
			kv := core.ServiceSpec{Name: "kv", Image: "registry.example/kv:1",
				HTTP:    []core.HTTPInterface{{Port: 8080, Host: "kv.example.com", Visibility: core.VisibilityPublic}},
				Volumes: []core.VolumeMount{{Name: "data", Path: "/data"}}}
			h.SeedServing("blog", coretest.BlogApp(kv), map[string]string{"kv": "c-old"}, map[string]map[int]int{"kv": {8080: 17000}})
			h.SeedOp(core.Operation{ID: "op-9", Kind: core.OpDeploy, App: "blog", Steps: []core.Step{
				{ID: engine.StepPreflight, State: core.StepSucceeded},
				{ID: "service.kv.replace", State: core.StepPending, Service: "kv"},
			}})
			h.SeedMarker(core.Marker{App: "blog", Service: "kv", Container: "c-old", Reason: core.MarkerReplacementPending, Operation: "op-9"})
			if !oldRunning {
				h.Runtime.Delete("c-old")
			}
			_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
			op, lerr := h.Store.LatestOp(context.Background(), "blog")
			require.NoError(t, lerr)
			require.Equal(t, core.OutcomeFailed, op.Outcome, "finalized")
			st := op.Step("service.kv.replace")
			require.Equal(t, core.StepFailed, st.State, "no step left pending in a finalized op")
			require.Contains(t, st.Error, "interrupted before a candidate")
			require.Empty(t, h.Store.Markers("blog"), "the stranded marker is cleared")
			if oldRunning {
				require.NoError(t, err)
				require.Equal(t, []int{17000}, h.LastRoute("blog", "kv"), "the old generation serves again")
			} else {
				require.ErrorIs(t, err, core.ErrNotFound, "the gone container is reported; start rebuilds it")
				require.NotContains(t, err.Error(), "recovery inhibited")
			}
		})
	}
}

// Found by adversarial testing: a remove killed right after its claim (no
// steps yet) was finalized as success while the app was half removed.
func TestR48_OpInterruptedBeforeAnyStepIsFailed(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-1"}, map[string]map[int]int{"web": {8080: 17000}})
	h.SeedOp(core.Operation{ID: "op-rm", Kind: core.OpRemove, App: "blog"})
	_, _ = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	op, err := h.Store.LatestOp(context.Background(), "blog")
	require.NoError(t, err)
	require.Equal(t, core.OutcomeFailed, op.Outcome)
	require.Equal(t, engine.StepError, op.Steps[len(op.Steps)-1].ID)
	require.Contains(t, op.Steps[len(op.Steps)-1].Error, "run the verb again")
}

// Decision 13 (found by adversarial testing): the per-container copy of a
// file secret is deleted when that container is retired. Copies are written
// under the container's name before it exists; retirement used to delete by
// ID only and left old secret values on disk.
func TestDecision13_RetiredGenerationSecretCopiesDeleted(t *testing.T) {
	h := coretest.NewEngine(t)
	web := coretest.WebSpec(0)
	web.Secrets = []core.SecretRef{{Env: "tok", Name: "tok", As: "file"}}
	_, err := h.Store.EnsureApp(h.Ctx(), "blog")
	require.NoError(t, err)
	require.NoError(t, h.Store.SetSecret(h.Ctx(), "blog", "web", "tok", []byte("v1")))
	h.Runtime.NextIDs = []string{"c-1", "c-2"}
	_, err = depDeploy(t, h, engine.DeployRequest{}, web)
	require.NoError(t, err)
	first := h.Runtime.Created()[0]
	require.NotEmpty(t, h.Store.ContainerSecrets("blog", first.Name), "copy written for c-1")

	web.Image = "registry.example/blog:1.5"
	_, err = depDeploy(t, h, engine.DeployRequest{}, web)
	require.NoError(t, err)
	require.False(t, h.Runtime.Exists("c-1"), "c-1 retired")
	require.Empty(t, h.Store.ContainerSecrets("blog", first.Name), "c-1's secret copies deleted with it")
}

// An online dump cut off by a crash is failed by reconciliation with what
// happened to it (nothing kept, the command may still run) and how to
// take one now, not as a replacement without a candidate.
func TestBackup_AnInterruptedDumpSaysNothingWasKept(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {8080: 17000}})
	h.SeedOp(core.Operation{ID: "op-7", Kind: core.OpRestart, Verb: "backup", App: "blog", Steps: []core.Step{
		{ID: "service.web.dump", State: core.StepPending, Service: "web"},
	}})
	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	op, err := h.Store.LatestOp(context.Background(), "blog")
	require.NoError(t, err)
	st := op.Step("service.web.dump")
	require.Equal(t, core.StepFailed, st.State)
	require.Contains(t, st.Error, "interrupted during the online dump; nothing of it was kept")
	require.Contains(t, st.Error, "docker gordon snapshots create blog --service web")
}

// A finished op whose way back was cut off (its runtime plugin died
// during the snapshot, so the old generation could not be started again
// nor the marker cleared) left a replacement-pending marker and no
// candidate: reconciliation clears the marker and the old generation
// serves again, instead of "recovery inhibited" at every pass (found by a
// breaker).
func TestR47_AFinishedOpsStrandedMarkerIsClearedWhenItCreatedNoCandidate(t *testing.T) {
	h := coretest.NewEngine(t)
	kv := core.ServiceSpec{Name: "kv", Image: "registry.example/kv:1",
		HTTP:    []core.HTTPInterface{{Port: 8080, Host: "kv.example.com", Visibility: core.VisibilityPublic}},
		Volumes: []core.VolumeMount{{Name: "data", Path: "/data"}}}
	h.SeedServing("blog", coretest.BlogApp(kv), map[string]string{"kv": "c-old"}, map[string]map[int]int{"kv": {8080: 17000}})
	h.SeedOp(core.Operation{ID: "op-9", Kind: core.OpDeploy, App: "blog", Outcome: core.OutcomeFailed, Steps: []core.Step{
		{ID: engine.StepPreflight, State: core.StepSucceeded},
		{ID: "service.kv.snapshot", State: core.StepFailed, Service: "kv", Error: "runtime plugin exited"},
		{ID: "service.kv.replace", State: core.StepFailed, Service: "kv", Error: "runtime plugin exited"},
	}})
	h.SeedMarker(core.Marker{App: "blog", Service: "kv", Container: "c-old", Reason: core.MarkerReplacementPending, Operation: "op-9"})
	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	require.Empty(t, h.Store.Markers("blog"), "the stranded marker is cleared")
	require.Equal(t, []int{17000}, h.LastRoute("blog", "kv"), "the old generation serves again")
}
