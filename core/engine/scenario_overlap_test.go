package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// depKinds are the effect kinds scenario orders are asserted on.
var depKinds = []string{"withdraw", "stop", "remove", "create", "start", "ready", "publish-active", "traffic"}

// depNewWeb returns the stateless web spec with a new image (digest change).
func depNewWeb(grace time.Duration) core.ServiceSpec {
	s := coretest.WebSpec(grace)
	s.Image = "registry.example/blog:1.5"
	return s
}

// depSeedWeb seeds the serving app: ACTIVE web → c-old {8080:17000}.
func depSeedWeb(t *testing.T, old core.ServiceSpec) *coretest.Harness {
	t.Helper()
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(old), map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {8080: 17000}})
	return h
}

// depDeploy submits spec as a new revision of blog and deploys it.
func depDeploy(t *testing.T, h *coretest.Harness, req engine.DeployRequest, services ...core.ServiceSpec) (*engine.DeployResult, error) {
	t.Helper()
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(services...), "sha-"+t.Name())
	require.NoError(t, err)
	h.Reset()
	if req.App == "" {
		req.App = "blog"
	}
	return h.Engine.Deploy(h.Ctx(), req)
}

func depMarkerReasons(h *coretest.Harness) map[string]string {
	out := map[string]string{}
	for _, m := range h.Store.Markers("blog") {
		out[m.Container] = m.Reason
	}
	return out
}

func depLastOp(t *testing.T, h *coretest.Harness) *core.Operation {
	t.Helper()
	op, err := h.Store.LatestOp(h.Ctx(), "blog")
	require.NoError(t, err)
	return &op
}

func TestS1_StatelessReplacementOverlapsAndSwitchesBeforeRetiring(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18080}}

	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)

	assert.Equal(t, []string{"create c-new", "start c-new", "ready c-new", "publish-active blog", "traffic", "stop c-old", "remove c-old"},
		h.Events.Seq(depKinds...))
	require.NotEmpty(t, h.Prober.Addresses())
	assert.Contains(t, h.Prober.Addresses()[0], "127.0.0.1:18080")
	a, ok := h.Store.Active("blog")
	require.True(t, ok)
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.Equal(t, map[int]int{8080: 18080}, a.Services["web"].BackendBinds)
	// marker saved before publication, cleared once after removal
	save, pub := h.Events.Index("marker-save", "c-old"), h.Events.Index("publish-active", "blog")
	require.GreaterOrEqual(t, save, 0)
	assert.Less(t, save, pub)
	assert.Equal(t, 1, h.Events.Count("marker-clear", "c-old"))
	assert.Greater(t, h.Events.Index("marker-clear", "c-old"), h.Events.Index("remove", "c-old"))
	assert.Empty(t, h.Store.Markers("blog"))
	assert.Empty(t, h.Store.ClaimsOf("c-old"))
	assert.Equal(t, 0, h.Events.Count("withdraw", ""))
	require.Len(t, res.Services, 1)
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
	assert.Equal(t, engine.FlowOverlap, res.Services[0].Flow)
	assert.Empty(t, res.Services[0].Warnings)
	op := depLastOp(t, h)
	assert.Equal(t, core.StepSucceeded, op.Step(engine.StepPreflight).State)
	st := op.Step("service.web.replace")
	require.NotNil(t, st)
	assert.Equal(t, core.StepSucceeded, st.State)
	assert.Equal(t, "c-old", st.Before)
	assert.Equal(t, "c-new", st.After)
	assert.Equal(t, core.OutcomeSuccess, op.Outcome)
	assert.Empty(t, op.Warnings)
}

func TestS2_HTTPOverlapPublishesBeforeRetiring(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18080}}

	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)

	create, pub, stop := h.Events.Index("create", "c-new"), h.Events.Index("publish-active", "blog"), h.Events.Index("stop", "c-old")
	require.True(t, create >= 0 && pub >= 0 && stop >= 0, h.Events.String())
	assert.Less(t, create, pub)
	assert.Less(t, pub, stop)
	assert.Equal(t, []core.Claim{{Port: 18080, Protocol: "tcp", Owner: core.ClaimOwnerBackend, App: "blog", Container: "c-new"}}, h.Store.ClaimsOf("c-new"))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, map[int]int{8080: 18080}, a.Services["web"].BackendBinds)
	assert.Less(t, h.Events.Index("marker-save", "c-old"), h.Events.Index("marker-clear", "c-old"))
	require.Len(t, h.Events.Find("remove", "c-old"), 1)
	assert.Equal(t, "", h.Events.Find("remove", "c-old")[0].Detail, "predecessor removed non-force")
	assert.Empty(t, h.Store.ClaimsOf("c-old"))
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
	assert.Equal(t, map[int]int{8080: 18080}, res.Services[0].BackendBinds)
	assert.Equal(t, coretest.T0, res.Services[0].StartedAt)
	assert.Empty(t, res.Warnings)
}

func TestS3_OldGraceUsed(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(45*time.Second))
	h.Runtime.NextIDs = []string{"c-new"}

	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(3*time.Second))
	require.NoError(t, err)

	assert.Equal(t, []coretest.StopCall{{ID: "c-old", Grace: 45 * time.Second}}, h.Runtime.Stops())
	assert.False(t, h.Runtime.Exists("c-old"))
	assert.Empty(t, h.Store.ClaimsOf("c-old"))
	assert.Equal(t, 1, h.Events.Count("marker-save", "c-old"))
	assert.Equal(t, 1, h.Events.Count("marker-clear", "c-old"))
	// The candidate is created with its own grace.
	assert.Equal(t, 3*time.Second, h.Runtime.Created()[0].StopGrace)
}

func TestS11_ReadinessFailureKeepsTheOldGenerationServing(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.LogsFor("c-new", "boom")
	h.Prober.Script("c-new", core.ProbeResult{}, errors.New("connection refused"))

	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.NotContains(t, err.Error(), "logs:")
	assert.NotContains(t, err.Error(), "boom")
	require.Len(t, res.Services, 1)
	assert.Equal(t, engine.ResultFailed, res.Services[0].Result)
	assert.Equal(t, []string{"boom"}, res.Services[0].Diagnostics)
	assert.Empty(t, h.Runtime.Stops())
	assert.True(t, h.Runtime.Running("c-old"))
	assert.Equal(t, 0, h.Store.Saves("SaveActive"))
	assert.Equal(t, 0, h.Events.Count("marker-save", ""))
	assert.NotEmpty(t, h.Store.ClaimsOf("c-old"))
	require.Len(t, h.Events.Find("remove", "c-new"), 1)
	assert.Equal(t, "force", h.Events.Find("remove", "c-new")[0].Detail)
	op := depLastOp(t, h)
	assert.Equal(t, []string{"boom"}, op.Step("service.web.replace").Diagnostics)
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
}

func TestS12_ReadinessFailureJournalsAndRemovesTheCandidate(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Prober.Script("c-new", core.ProbeResult{}, errors.New("connection refused"))

	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.Error(t, err)

	assert.Equal(t, []string{"create c-new", "start c-new", "remove c-new"}, h.Events.Seq("create", "start", "stop", "remove", "publish-active", "traffic", "withdraw"))
	assert.Equal(t, 0, h.Store.Saves("SaveActive"))
	assert.Equal(t, 0, h.Events.Count("marker-save", ""))
	assert.Equal(t, 0, h.Events.Count("marker-clear", ""))
	assert.Equal(t, 0, h.Events.Count("claims-release", "c-old"))
	st := depLastOp(t, h).Step("service.web.replace")
	assert.Equal(t, core.StepFailed, st.State)
	assert.Equal(t, "c-new", st.After)
	assert.Contains(t, st.Error, "service web")
	assert.Contains(t, st.Error, "service.web.replace")
}

func TestS13_DeployCandidateCleanupFailureStaysVisible(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Prober.Script("c-new", core.ProbeResult{}, errors.New("connection refused"))
	h.Runtime.Fail(coretest.MRemove, "c-new", errors.New("device or resource busy"), 0)

	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.Error(t, err)
	require.Len(t, res.Services, 1)
	assert.Equal(t, engine.ResultFailed, res.Services[0].Result)
	require.Len(t, res.Services[0].Warnings, 1)
	assert.Equal(t, "c-new", res.Services[0].Warnings[0].Leftover)
	op := depLastOp(t, h)
	require.Len(t, op.Warnings, 1)
	assert.Equal(t, core.Warning{Service: "web", Leftover: "c-new", Detail: res.Services[0].Warnings[0].Detail}, op.Warnings[0])
	assert.Equal(t, "c-new", op.Step("service.web.replace").After)
}

func TestS14_CancellationDuringReadinessIsNotSuccess(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(depNewWeb(0)), "s14")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(h.Ctx())
	h.Prober.CheckFn = func(pctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
		cancel()
		<-pctx.Done()
		return core.ProbeResult{}, pctx.Err()
	}
	h.Runtime.Hook = func(hctx context.Context, method, id string) error {
		if method == coretest.MRemove && id == "c-new" {
			return context.Canceled // the runtime refuses with the cancellation error (S14)
		}
		return nil
	}

	res, err := h.Engine.Deploy(ctx, engine.DeployRequest{App: "blog"})
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, res)
	require.Len(t, res.Services, 1)
	assert.Equal(t, engine.ResultFailed, res.Services[0].Result)
	require.NotEmpty(t, res.Services[0].Warnings)
	assert.Equal(t, "c-new", res.Services[0].Warnings[0].Leftover)
	assert.True(t, h.Runtime.Running("c-old"))
}

func TestS15_PublicationFailureKeepsTheOldContainer(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(depNewWeb(0)), "s15")
	require.NoError(t, err)
	h.Reset()
	h.Store.FailNext("SaveActive", errors.New("disk full"))

	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.Error(t, err)
	require.Len(t, res.Services, 1)
	sr := res.Services[0]
	assert.Equal(t, engine.ResultFailed, sr.Result)
	assert.Equal(t, "c-new", sr.After)
	require.Len(t, sr.Warnings, 1)
	assert.Equal(t, "c-old", sr.Warnings[0].Leftover)
	assert.Contains(t, sr.Warnings[0].Detail, "superseded container kept running")
	assert.Equal(t, core.MarkerRetirementPending, depMarkerReasons(h)["c-old"])
	assert.Equal(t, 0, h.Events.Count("withdraw", ""))
	assert.Equal(t, 0, h.Events.Count("traffic", ""))
	assert.Empty(t, h.Runtime.Stops())
	assert.Equal(t, 0, h.Events.Count("remove", ""))
	assert.Equal(t, 0, h.Events.Count("claims-release", ""))
	assert.True(t, h.Runtime.Running("c-new"))
	assert.Equal(t, "c-new", depLastOp(t, h).Step("service.web.replace").After)
}

func TestS16_TrafficFailureRecordsAFailedStep(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Traffic.FailApplies(1)

	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.Error(t, err)
	op := depLastOp(t, h)
	st := op.Step("service.web.replace")
	assert.Equal(t, core.StepFailed, st.State)
	assert.Equal(t, "c-old", st.Before)
	assert.Equal(t, "c-new", st.After)
	require.Len(t, op.Warnings, 1)
	assert.Equal(t, "c-old", op.Warnings[0].Leftover)
	require.Len(t, res.Services[0].Warnings, 1)
	assert.Equal(t, "c-old", res.Services[0].Warnings[0].Leftover)
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container, "ACTIVE names the candidate")
	assert.Equal(t, core.MarkerRetirementPending, depMarkerReasons(h)["c-old"])
	assert.Equal(t, 0, h.Events.Count("marker-clear", ""))
	assert.Empty(t, h.Runtime.Stops())
	assert.Equal(t, 0, h.Events.Count("remove", ""))
	assert.Equal(t, 0, h.Events.Count("claims-release", ""))
}

func TestS18_OldRetirementFailureIsAWarning(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(45*time.Second))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.Fail(coretest.MRemove, "c-old", errors.New("removal in progress"), 1)

	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	require.Len(t, res.Services, 1)
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
	require.Len(t, res.Services[0].Warnings, 1)
	w := res.Services[0].Warnings[0]
	assert.Equal(t, "web", w.Service)
	assert.Equal(t, "c-old", w.Leftover)
	assert.Contains(t, w.Detail, "remove")
	assert.NotEmpty(t, h.Store.ClaimsOf("c-old"))
	assert.Equal(t, 0, h.Events.Count("marker-clear", ""))
	// S19's first half: the marker carries the old grace.
	ms := h.Store.Markers("blog")
	require.Len(t, ms, 1)
	assert.Equal(t, core.Marker{App: "blog", Service: "web", Container: "c-old", Reason: core.MarkerRetirementPending,
		Operation: res.Op.ID, CreatedAt: coretest.T0, StopGrace: core.Duration(45 * time.Second)}, ms[0])
	assert.Equal(t, []core.Warning{w}, depLastOp(t, h).Warnings)
}

func TestS20_PendingWithdrawalDoesNotEraseTheSwitch(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	require.NoError(t, h.Store.SaveRecovery(h.Ctx(), "blog", core.Recovery{PendingWithdrawals: map[string]bool{"web": true}}))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18081}}

	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)
	assert.Less(t, h.Events.Index("withdraw", "blog/web"), h.Events.Index("create", "c-new"))
	assert.Equal(t, 1, h.Events.Count("withdraw", ""))
	assert.Equal(t, []coretest.StopCall{{ID: "c-old", Grace: 30 * time.Second}}, h.Runtime.Stops())
	assert.False(t, h.Runtime.Exists("c-old"))
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
	assert.Equal(t, []int{18081}, coretest.HostPorts(h.Traffic.Last(), "blog", "web"))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, map[int]int{8080: 18081}, a.Services["web"].BackendBinds)
	rec, err := h.Store.LoadRecovery(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.False(t, rec.PendingWithdrawals["web"])
}

func TestS17_TrafficFailureRecoveredByThePeriodicPass(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18081}}
	h.Traffic.FailApplies(1)

	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.Error(t, err)
	assert.Empty(t, h.Runtime.Stops())
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"))

	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.Equal(t, []coretest.StopCall{{ID: "c-old", Grace: 30 * time.Second}}, h.Runtime.Stops())
	assert.False(t, h.Runtime.Exists("c-old"))
	assert.Equal(t, []int{18081}, coretest.HostPorts(h.Traffic.Last(), "blog", "web"))
	assert.Empty(t, h.Store.Markers("blog"))
}

func TestS19_RetirementSurvivesANewerOperation(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(45*time.Second))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.Fail(coretest.MRemove, "c-old", errors.New("removal in progress"), 1)

	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)
	require.Len(t, res.Warnings, 1)
	assert.Equal(t, "c-old", res.Warnings[0].Leftover)
	ms := h.Store.Markers("blog")
	require.Len(t, ms, 1)
	assert.Equal(t, core.MarkerRetirementPending, ms[0].Reason)
	assert.Equal(t, core.Duration(45*time.Second), ms[0].StopGrace)

	// A newer successful op becomes the latest.
	newer, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, newer.Outcome)
	assert.Equal(t, newer.Op.ID, depLastOp(t, h).ID)
	assert.Equal(t, []string{"c-old"}, h.Store.MarkerContainers("blog"))

	h.Runtime.SetBinds("c-new", map[int]int{8080: 18082})
	h.Reset()
	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	// The deploy's stop and the pass's stop, both with the old grace.
	assert.Equal(t, []coretest.StopCall{{ID: "c-old", Grace: 45 * time.Second}, {ID: "c-old", Grace: 45 * time.Second}}, h.Runtime.Stops())
	assert.Equal(t, 1, h.Events.Count("remove", "c-old"))
	assert.False(t, h.Runtime.Exists("c-old"))
	assert.Empty(t, h.Store.Markers("blog"))
	assert.Equal(t, []int{18082}, coretest.HostPorts(h.Traffic.Last(), "blog", "web"))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
}

func TestR5_DurabilityOrderOfAnOverlapDeploy(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}

	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)
	ev := h.Events.List()
	first := func(pred func(coretest.Event) bool) int {
		for i, e := range ev {
			if pred(e) {
				return i
			}
		}
		return -1
	}
	claim := h.Events.Index("journal-claim", "")
	pinned := first(func(e coretest.Event) bool {
		return e.Kind == "journal-save" && strings.Contains(e.Detail, `"id":"service.web.replace","state":"pending"`)
	})
	after := first(func(e coretest.Event) bool {
		return e.Kind == "journal-save" && strings.Contains(e.Detail, `"after":"c-new"`)
	})
	succeeded := first(func(e coretest.Event) bool {
		return e.Kind == "journal-save" && strings.Contains(e.Detail, `"id":"service.web.replace","state":"succeeded"`)
	})
	order := []int{
		claim,                                     // (1) journal before any effect
		h.Events.Index("ensure-network", ""),      // preflight
		pinned,                                    // (2) pinned table before any mutation
		h.Events.Index("create", "c-new"),         //
		after,                                     // (3) After before start
		h.Events.Index("start", "c-new"),          //
		h.Events.Index("marker-save", "c-old"),    // (5) marker before the switch
		h.Events.Index("publish-active", "blog"),  // (6) ACTIVE before traffic
		h.Events.Index("traffic", ""),             //
		h.Events.Index("recovery-save", "blog"),   // (8) execution after routing
		h.Events.Index("remove", "c-old"),         //
		h.Events.Index("claims-release", "c-old"), // (9) release after gone
		h.Events.Index("marker-clear", "c-old"),   // marker cleared after release
		succeeded,                                 // (7) succeeded after ACTIVE and traffic
	}
	for i, p := range order {
		require.GreaterOrEqual(t, p, 0, "order[%d] missing\n%s", i, h.Events.String())
		if i > 0 {
			assert.Greater(t, p, order[i-1], "order[%d] before order[%d]\n%s", i, i-1, h.Events.String())
		}
	}
}

func TestR18_RetirementMarkerFailureRemovesTheCandidate(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(depNewWeb(0)), "r18")
	require.NoError(t, err)
	h.Reset()
	h.Store.FailNext("SaveMarker", errors.New("disk full"))

	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "retirement-pending")
	assert.Equal(t, "force", h.Events.Find("remove", "c-new")[0].Detail)
	assert.True(t, h.Runtime.Running("c-old"))
	assert.Equal(t, 0, h.Store.Saves("SaveActive"))
	assert.Equal(t, "c-new", res.Services[0].After)
	assert.Equal(t, core.StepFailed, depLastOp(t, h).Step("service.web.replace").State)
}

func TestDecision13_FailedCandidateSecretFilesDeleted(t *testing.T) {
	web := depNewWeb(0)
	web.Secrets = []core.SecretRef{{Env: "key", Name: "tls-key", As: "file"}}
	h := depSeedWeb(t, coretest.WebSpec(0))
	require.NoError(t, h.Store.SetSecret(h.Ctx(), "blog", "web", "tls-key", []byte("KEY")))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Prober.Script("c-new", core.ProbeResult{}, errors.New("connection refused"))

	_, err := depDeploy(t, h, engine.DeployRequest{}, web)
	require.Error(t, err)
	name := h.Runtime.Created()[0].Name
	assert.GreaterOrEqual(t, h.Events.Count("secrets-delete", name), 1, h.Events.String())
}
