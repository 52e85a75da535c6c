package engine_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func TestR6_ReplayedKeyReturnsStoredJournalAndRunsNothing(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	first, err := depDeploy(t, h, engine.DeployRequest{OpKey: "key-1"}, depNewWeb(0))
	require.NoError(t, err)
	h.Reset()

	again, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", OpKey: "key-1"})
	require.NoError(t, err, "R8: a replayed success returns no error")
	assert.True(t, again.Replayed)
	assert.Equal(t, first.Op.ID, again.Op.ID)
	assert.Equal(t, core.OutcomeSuccess, again.Outcome)
	require.Len(t, again.Services, 1)
	assert.Equal(t, engine.ResultDeployed, again.Services[0].Result)
	for _, k := range []string{"create", "start", "stop", "remove", "publish-active", "traffic", "journal-claim"} {
		assert.Equal(t, 0, h.Events.Count(k, ""), k)
	}
}

func TestR8_ReplayOfFailedOpIsConflictNamingOutcome(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Prober.Script("c-new", core.ProbeResult{}, errors.New("connection refused"))
	_, err := depDeploy(t, h, engine.DeployRequest{OpKey: "key-f"}, depNewWeb(0))
	require.Error(t, err)
	h.Reset()

	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", OpKey: "key-f"})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "failed")
	require.NotNil(t, res)
	assert.True(t, res.Replayed)
	assert.Equal(t, 0, h.Events.Count("create", ""))
}

func TestR6_SameKeyDifferentRequestIsConflict(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	_, err := depDeploy(t, h, engine.DeployRequest{OpKey: "key-2"}, depNewWeb(0))
	require.NoError(t, err)
	h.Reset()
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", OpKey: "key-2", Services: []string{"web"}})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "different request")
	assert.Equal(t, 0, h.Events.Count("create", ""))
}

func TestDecision4_DeployThatChangesNothingIsUnchangedSuccess(t *testing.T) {
	api := coretest.WebSpec(0)
	api.Name, api.HTTP[0].Host = "api", "api.example.com"
	h := coretest.NewEngine(t)
	_, err := depDeploy(t, h, engine.DeployRequest{}, api, coretest.WebSpec(0))
	require.NoError(t, err)
	before, _ := h.Store.Active("blog")
	h.Reset()

	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	require.Len(t, res.Services, 2)
	for _, s := range res.Services {
		assert.Equal(t, engine.ResultUnchanged, s.Result, s.Service)
		assert.Equal(t, s.Before, s.After)
		assert.NotEmpty(t, s.BackendBinds)
	}
	assert.Equal(t, 0, h.Events.Count("create", ""))
	assert.Equal(t, 0, h.Events.Count("stop", ""))
	after, _ := h.Store.Active("blog")
	assert.Equal(t, before.Services["web"].ActivatedBy, after.Services["web"].ActivatedBy, "R15: activation metadata preserved")
	st := depLastOp(t, h).Step("service.web.replace")
	assert.True(t, strings.HasPrefix(st.Detail, "unchanged: already running registry.example/blog:1.4@sha256:"), st.Detail)
}

func TestR15_UnchangedRecordsNoExecutionAndRetiresNothing(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-older", Reason: core.MarkerRetirementPending})
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, engine.ResultUnchanged, res.Services[0].Result)
	assert.Equal(t, 1, h.Events.Count("traffic", ""), "unchanged still routes")
	for _, p := range h.Progress() {
		assert.NotEqual(t, "switch", string(p.Phase), "an unchanged service shows no switch")
	}
	assert.Equal(t, 0, h.Events.Count("recovery-save", ""))
	assert.Equal(t, []string{"c-older"}, h.Store.MarkerContainers("blog"))
}

func TestDecision14_TargetedDeployTouchesOnlyNamedServices(t *testing.T) {
	api := coretest.WebSpec(0)
	api.Name, api.HTTP[0].Host = "api", "api.example.com"
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(api, coretest.WebSpec(0)), map[string]string{"api": "c-api", "web": "c-web"},
		map[string]map[int]int{"api": {8080: 17001}, "web": {8080: 17000}})
	api2, web2 := api, depNewWeb(0)
	api2.Image = "registry.example/api:2"
	h.Runtime.NextIDs = []string{"c-web2"}

	res, err := depDeploy(t, h, engine.DeployRequest{Services: []string{"web"}}, api2, web2)
	require.NoError(t, err)
	require.Len(t, res.Services, 1)
	assert.Equal(t, "web", res.Services[0].Service)
	assert.True(t, h.Runtime.Running("c-api"))
	assert.Equal(t, 0, h.Events.Count("stop", "c-api"))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-api", a.Services["api"].Container)
	assert.Equal(t, "rev-0", a.Services["api"].EffectiveRevision)
	assert.Equal(t, "c-web2", a.Services["web"].Container)
	assert.False(t, a.Converged)
	assert.Nil(t, depLastOp(t, h).Step("service.api.replace"))

	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Services: []string{"nope"}})
	assert.ErrorIs(t, err, core.ErrInvalid)
}

func TestR56_DroppedServiceIsRemovedInAFullDeploy(t *testing.T) {
	api := coretest.WebSpec(7 * time.Second)
	api.Name, api.HTTP[0].Host = "api", "api.example.com"
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(api, coretest.WebSpec(0)), map[string]string{"api": "c-api", "web": "c-web"},
		map[string]map[int]int{"api": {8080: 17001}, "web": {8080: 17000}})

	res, err := depDeploy(t, h, engine.DeployRequest{}, coretest.WebSpec(0))
	require.NoError(t, err)
	assert.Equal(t, []string{"withdraw blog/api", "marker-save c-api", "stop c-api", "remove c-api", "claims-release c-api", "marker-clear c-api"},
		h.Events.Seq("withdraw", "marker-save", "stop", "remove", "claims-release", "marker-clear")[:6])
	assert.Equal(t, 7*time.Second, h.Runtime.Stops()[0].Grace)
	a, _ := h.Store.Active("blog")
	assert.NotContains(t, a.Services, "api")
	assert.True(t, a.Converged)
	require.Len(t, res.Services, 2)
	assert.Equal(t, engine.ServiceResult{Service: "api", Result: engine.ResultRemoved, Before: "c-api"}, res.Services[0])
	assert.Equal(t, engine.ResultUnchanged, res.Services[1].Result)
	op := depLastOp(t, h)
	assert.Equal(t, core.StepSucceeded, op.Step("service.api.remove").State)
	assert.Equal(t, core.OutcomeSuccess, op.Outcome)
	assert.Empty(t, h.Store.Markers("blog"))
}

func TestR56_DroppedServiceFailureFailsBeforePublishing(t *testing.T) {
	api := coretest.WebSpec(0)
	api.Name, api.HTTP[0].Host = "api", "api.example.com"
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(api, coretest.WebSpec(0)), map[string]string{"api": "c-api", "web": "c-web"},
		map[string]map[int]int{"api": {8080: 17001}, "web": {8080: 17000}})
	h.Runtime.Fail(coretest.MRemove, "c-api", errors.New("removal refused"), 1)

	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "service.api.remove")
	assert.Equal(t, 0, h.Events.Count("create", ""))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-api", a.Services["api"].Container)
	assert.Equal(t, core.MarkerRemoved, depMarkerReasons(h)["c-api"])
}

func TestDryRun_PrintsThePlanWithoutEffects(t *testing.T) {
	db := core.ServiceSpec{Name: "db", Image: "pg:16", Volumes: []core.VolumeMount{{Name: "data", Path: "/d"}}}
	h := depSeedWeb(t, coretest.WebSpec(0))
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(db, depNewWeb(0)), "dry")
	require.NoError(t, err)
	h.Reset()

	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", DryRun: true})
	require.NoError(t, err)
	require.NotNil(t, res.Plan)
	assert.Equal(t, "app blog, revision rev-1 (full deploy):\n"+
		"  db: new (nothing serves it yet)\n"+
		"    readiness: none (no HTTP or TCP interface to probe)\n"+
		"  web: overlap (stateless: no volume, bind, device or UDP), changed: image digest\n"+
		"    readiness: http GET /healthz on :8080 (declared)\n", res.Plan.String())
	for _, k := range []string{"create", "pull", "journal-claim", "journal-save", "publish-active", "ensure-network"} {
		assert.Equal(t, 0, h.Events.Count(k, ""), k)
	}
}

func TestS56_DeployReconcilesAnInterruptedPredecessorFirst(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.AddContainer("c-orphan", core.ContainerState{}, map[int]int{8080: 18099})
	h.SeedOp(core.Operation{ID: "op-0", Kind: core.OpDeploy, App: "blog", Revision: "rev-0", Steps: []core.Step{
		{ID: engine.StepPreflight, State: core.StepSucceeded},
		{ID: "service.web.replace", State: core.StepPending, Service: "web", Before: "c-old", After: "c-orphan"},
	}})
	h.Runtime.NextIDs = []string{"c-next"}

	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)
	orphan, create, retire := h.Events.Index("remove", "c-orphan"), h.Events.Index("create", "c-next"), h.Events.Index("stop", "c-old")
	require.True(t, orphan >= 0 && create >= 0 && retire >= 0, h.Events.String())
	assert.Less(t, orphan, create)
	assert.Less(t, create, retire)
	assert.Equal(t, "force", h.Events.Find("remove", "c-orphan")[0].Detail)
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-next", a.Services["web"].Container)
	prev, ok := h.Store.Op("blog", "op-0")
	require.True(t, ok)
	assert.Equal(t, core.OutcomeFailed, prev.Outcome)
}

func TestR47_DeployRefusedWhileAnOrphanResists(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.AddContainer("c-orphan", core.ContainerState{}, nil)
	h.SeedOp(core.Operation{ID: "op-0", Kind: core.OpDeploy, App: "blog", Revision: "rev-0", Steps: []core.Step{
		{ID: "service.web.replace", State: core.StepPending, Service: "web", Before: "c-old", After: "c-orphan"},
	}})
	h.Runtime.Fail(coretest.MRemove, "c-orphan", errors.New("device busy"), 0)

	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Equal(t, 0, h.Events.Count("create", ""))
	assert.Equal(t, 0, h.Events.Count("journal-claim", ""), "R7: no claim over an unfinished op")
}

func TestR17_FailureLogTailIsRedactedAndBounded(t *testing.T) {
	web := depNewWeb(0)
	web.Secrets = []core.SecretRef{{Env: "TOKEN", Name: "token"}}
	h := depSeedWeb(t, coretest.WebSpec(0))
	require.NoError(t, h.Store.SetSecret(h.Ctx(), "blog", "web", "token", []byte("hunter2")))
	h.Engine.LogTailLines = 3
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.LogsFor("c-new", "starting", "token is hunter2", "dial db: refused", "panic: boom")
	h.Prober.Script("c-new", core.ProbeResult{}, errors.New("connection refused"))

	res, err := depDeploy(t, h, engine.DeployRequest{}, web)
	require.Error(t, err)
	assert.Equal(t, []string{"token is ****", "dial db: refused", "panic: boom"}, res.Services[0].Diagnostics)
	assert.NotContains(t, err.Error(), "panic: boom")
}

func TestDecision12_CandidateNameAndLabels(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Engine.NewOpID = func() string { return "op-0123456789abcdef" }
	_, err := depDeploy(t, h, engine.DeployRequest{}, coretest.WebSpec(0))
	require.NoError(t, err)
	cs := h.Runtime.Created()
	require.Len(t, cs, 1)
	info, err := h.Store.LoadApp(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, "gordon-blog-web-89abcdef", cs[0].Name)
	assert.Equal(t, map[string]string{
		core.LabelManaged: "true", core.LabelApp: "blog", core.LabelService: "web", core.LabelIncarnation: info.Incarnation,
		core.LabelOp: "op-0123456789abcdef", core.LabelRevision: "rev-0", core.LabelRole: "workload",
	}, cs[0].Labels)
	assert.Equal(t, "gordon-blog", cs[0].Network)
	assert.Equal(t, []string{"web"}, cs[0].Aliases)
	assert.Equal(t, "web", cs[0].Hostname)
	assert.Equal(t, 1, h.Events.Count("ensure-network", "gordon-blog"))
}

func TestDecision13_FileSecretMountedReadOnly(t *testing.T) {
	web := coretest.WebSpec(0)
	web.Secrets = []core.SecretRef{{Env: "tls.key", Name: "tls-key", As: "file"}}
	h := coretest.NewEngine(t)
	_, err := h.Store.EnsureApp(h.Ctx(), "blog")
	require.NoError(t, err)
	require.NoError(t, h.Store.SetSecret(h.Ctx(), "blog", "web", "tls-key", []byte("KEY")))
	_, err = depDeploy(t, h, engine.DeployRequest{}, web)
	require.NoError(t, err)
	cs := h.Runtime.Created()
	require.Len(t, cs, 1)
	require.Len(t, cs[0].Mounts, 1)
	m := cs[0].Mounts[0]
	assert.Equal(t, core.MountBind, m.Type)
	assert.Equal(t, "/run/secrets/tls.key", m.Target)
	assert.Equal(t, "tls.key", m.Secret, "marked as a file secret (a swarm delivers it as a Docker secret)")
	assert.True(t, m.ReadOnly)
	assert.NotEmpty(t, m.Source)
	assert.NotContains(t, strings.Join(cs[0].Env, " "), "KEY")
}

func TestDecision16_DrainBeforeStopAndProgress(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Engine.DrainTimeout = 2 * time.Second
	h.Traffic.InFlightSeq("127.0.0.1:17000", 2, 1, 0)
	h.Runtime.NextIDs = []string{"c-new"}

	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)
	var phases []string
	for _, p := range h.Progress() {
		if p.Service == "web" {
			phases = append(phases, string(p.Phase))
		}
	}
	drain, stop := indexOf(phases, "drain"), indexOf(phases, "stop")
	require.True(t, drain >= 0 && stop >= 0, fmt.Sprint(phases))
	assert.Less(t, drain, stop)
	for _, p := range []string{"resolve", "create", "start", "probe", "switch", "retire", "done"} {
		assert.Contains(t, phases, p)
	}
	st := depLastOp(t, h).Step("service.web.replace")
	for _, p := range []string{"create", "start", "probe", "switch", "drain", "retire"} {
		assert.Contains(t, st.Phases, p)
	}
	// The wait for the app lock is journaled too (deploy latency splits by
	// phase), on the preflight step.
	assert.Contains(t, depLastOp(t, h).Step(engine.StepPreflight).Phases, "lock")
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func TestSubmitRevision_IdenticalSpecReusesDesired(t *testing.T) {
	h := coretest.NewEngine(t)
	r1, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), "abc")
	require.NoError(t, err)
	r2, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), "abc")
	require.NoError(t, err)
	assert.Equal(t, r1.ID, r2.ID)
	r3, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(depNewWeb(0)), "def")
	require.NoError(t, err)
	assert.NotEqual(t, r1.ID, r3.ID)
	d, err := h.Store.LoadDesired(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, r3.ID, d)
	_, err = h.Engine.SubmitRevision(h.Ctx(), core.AppSpec{}, "")
	assert.ErrorIs(t, err, core.ErrInvalid)
}

func TestR12_DeployOfUnknownRevisionIsRefusedBeforeClaim(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	_, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: "rev-9"})
	assert.ErrorIs(t, err, core.ErrNotFound)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Pull: "sometimes"})
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.Equal(t, 0, h.Events.Count("journal-claim", ""))
	assert.False(t, h.Store.Locked("blog"))
}

func TestDryRun_UnsavedSpecIsPlannedAndNothingStored(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	spec := coretest.BlogApp(depNewWeb(0))
	p, err := h.Engine.PlanDeploy(h.Ctx(), engine.DeployRequest{App: "blog", Spec: &spec, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, "app blog, revision (unsaved) (full deploy):\n"+
		"  web: overlap (stateless: no volume, bind, device or UDP), changed: image digest\n"+
		"    readiness: http GET /healthz on :8080 (declared)\n", p.String())
	revs, err := h.Store.ListRevisions(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Len(t, revs, 1)

	fresh := coretest.BlogApp(coretest.WebSpec(0))
	fresh.Name = "shop"
	p, err = h.Engine.PlanDeploy(h.Ctx(), engine.DeployRequest{Spec: &fresh})
	require.NoError(t, err)
	assert.Equal(t, "app shop, revision (unsaved) (full deploy):\n  web: new (nothing serves it yet)\n    readiness: http GET /healthz on :8080 (declared)\n", p.String())

	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Spec: &spec})
	assert.ErrorIs(t, err, core.ErrInvalid)
}

// A dry run says what the deploy would meet at preflight but the plan does
// not stop at: an image the engine does not have (pulled first, or refused
// with --pull=never) and a secret that is not set; nothing is changed.
func TestDryRun_WarnsOfMissingImageAndUnsetSecret(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	web := depNewWeb(0)
	web.Secrets = []core.SecretRef{{Env: "DB_PASSWORD", Name: "db-password"}}
	spec := coretest.BlogApp(web)
	h.Runtime.Fail(coretest.MResolve, web.Image, fmt.Errorf("%w: no such image", core.ErrNotFound), 0)

	p, err := h.Engine.PlanDeploy(h.Ctx(), engine.DeployRequest{App: "blog", Spec: &spec, DryRun: true})
	require.NoError(t, err)
	require.Len(t, p.Warnings, 2, "%v", p.Warnings)
	assert.Contains(t, p.Warnings[0], "image "+web.Image+" is not on the engine: the deploy pulls it first")
	assert.Contains(t, p.Warnings[1], `secret "db-password" is not set`)
	assert.Contains(t, p.Warnings[1], "the deploy is refused unless it is set first")
	assert.Contains(t, p.String(), "warning: service web: image ")

	p, err = h.Engine.PlanDeploy(h.Ctx(), engine.DeployRequest{App: "blog", Spec: &spec, DryRun: true, Pull: engine.PullNever})
	require.NoError(t, err)
	assert.Contains(t, p.Warnings[0], "--pull=never: the deploy would be refused")
	assert.Equal(t, 0, h.Runtime.Calls(coretest.MPull), "a plan pulls nothing")

	// R12: a service with a build section has its image built by the
	// deploy, not pulled.
	spec.Services[0].Build = &core.BuildSpec{Context: "."}
	p, err = h.Engine.PlanDeploy(h.Ctx(), engine.DeployRequest{App: "blog", Spec: &spec, DryRun: true})
	require.NoError(t, err)
	assert.Contains(t, p.Warnings[0], "is not on the engine yet: the deploy builds it first")
	assert.NotContains(t, p.Warnings[0], "pulls")
}
