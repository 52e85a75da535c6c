package engine_test

import (
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

// seqVariants are S4's non-eligible services (each with policies allowing).
func seqVariants() map[string]func(s *core.ServiceSpec) {
	return map[string]func(s *core.ServiceSpec){
		"volume": func(s *core.ServiceSpec) {
			s.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
		},
		"read-only bind": func(s *core.ServiceSpec) {
			s.Binds = []core.BindMount{{Name: "config", Path: "/etc/app", ReadOnly: true}}
		},
		"device": func(s *core.ServiceSpec) {
			s.Devices = []string{"/dev/dri/renderD128"}
		},
		"public UDP": func(s *core.ServiceSpec) {
			s.UDP = []core.L4Interface{{Port: 28015, Publish: "0.0.0.0:28015"}}
		},
	}
}

func allowBinds(h *coretest.Harness) {
	h.Engine.BindPolicy = func(name string) (string, error) { return "/srv/approved/" + name, nil }
}

// seqEvents are the kinds S4–S7 orders are asserted on.
var seqEvents = []string{"withdraw", "stop", "remove", "create", "start", "publish-active", "traffic"}

func TestS4_NonEligibleServicesStaySequential(t *testing.T) {
	for name, mutate := range seqVariants() {
		t.Run(name, func(t *testing.T) {
			old := coretest.WebSpec(0)
			mutate(&old)
			next := depNewWeb(0)
			mutate(&next)
			h := depSeedWeb(t, old)
			allowBinds(h)
			h.Runtime.NextIDs = []string{"c-new"}

			res, err := depDeploy(t, h, engine.DeployRequest{}, next)
			require.NoError(t, err)

			// The withdrawal drops the binds from ACTIVE (publish-active) and
			// applies routing (traffic) before anything is stopped.
			assert.Equal(t, []string{"withdraw blog/web", "publish-active blog", "traffic", "stop c-old", "remove c-old",
				"create c-new", "start c-new", "publish-active blog", "traffic"}, h.Events.Seq(seqEvents...))
			saves := h.Events.Find("marker-save", "c-old")
			if next.SingleWriter() {
				require.Len(t, saves, 1)
				assert.Equal(t, core.MarkerReplacementPending, saves[0].Detail)
			} else {
				assert.Empty(t, saves)
			}
			assert.Greater(t, h.Events.Index("marker-clear", "c-old"), h.Events.LastIndex("publish-active", "blog"))
			assert.Empty(t, h.Store.Markers("blog"))
			assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
			assert.Equal(t, engine.FlowSequential, res.Services[0].Flow)
		})
	}
}

func TestS5_PredecessorWithOwnedResourcesNeverOverlaps(t *testing.T) {
	for name, mutate := range map[string]func(s *core.ServiceSpec){
		"UDP":    seqVariants()["public UDP"],
		"volume": seqVariants()["volume"],
	} {
		t.Run(name, func(t *testing.T) {
			old := coretest.WebSpec(0)
			mutate(&old)
			h := depSeedWeb(t, old)
			h.Runtime.NextIDs = []string{"c-new"}

			res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
			require.NoError(t, err)
			seq := h.Events.Seq("withdraw", "stop", "remove", "create", "start")
			assert.Equal(t, []string{"withdraw blog/web", "stop c-old", "remove c-old", "create c-new", "start c-new"}, seq)
			assert.Equal(t, 0, h.Events.Count("marker-save", ""))
			assert.Equal(t, 1, h.Events.Count("marker-clear", "c-old"))
			assert.Equal(t, engine.FlowSequential, res.Services[0].Flow)
		})
	}
}

func TestS6_HTTPWithAVolumeStaysSequential(t *testing.T) {
	old := coretest.WebSpec(0)
	seqVariants()["volume"](&old)
	next := depNewWeb(0)
	seqVariants()["volume"](&next)
	h := depSeedWeb(t, old)
	h.Runtime.NextIDs = []string{"c-new"}

	res, err := depDeploy(t, h, engine.DeployRequest{}, next)
	require.NoError(t, err)
	assert.Equal(t, []string{"gordon-blog-data"}, h.Runtime.Volumes())
	assert.Equal(t, 1, h.Events.Count("ensure-volume", "gordon-blog-data"))
	assert.Equal(t, 1, h.Events.Count("marker-save", "c-old"))
	// R5(4): replacement-pending is durable before the old single writer
	// is stopped.
	require.GreaterOrEqual(t, h.Events.Index("marker-save", "c-old"), 0)
	assert.Less(t, h.Events.Index("marker-save", "c-old"), h.Events.Index("stop", "c-old"))
	assert.Equal(t, core.MarkerReplacementPending, h.Events.Find("marker-save", "c-old")[0].Detail)
	assert.Less(t, h.Events.Index("remove", "c-old"), h.Events.Index("create", "c-new"))
	assert.Less(t, h.Events.Index("stop", "c-old"), h.Events.Index("remove", "c-old"))
	// ACTIVE names c-new only after it exists and is ready.
	named := 0
	for i, e := range h.Events.List() {
		if e.Kind == "publish-active" && strings.Contains(e.Detail, "c-new") {
			named++
			assert.Greater(t, i, h.Events.Index("ready", "c-new"), "ACTIVE named c-new before it was ready")
		}
	}
	assert.Positive(t, named, "ACTIVE never named c-new")
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-new", a.Services["web"].Container)
	assert.Empty(t, res.Warnings)
	mounts := h.Runtime.Created()[0].Mounts
	assert.Equal(t, []core.Mount{{Type: core.MountVolume, Source: "gordon-blog-data", Target: "/data"}}, mounts)
}

func TestS7_VolumeReplacementPreventsOverlappingWriters(t *testing.T) {
	old := coretest.WebSpec(0)
	seqVariants()["volume"](&old)
	next := depNewWeb(0)
	seqVariants()["volume"](&next)
	next.Readiness = core.Readiness{Type: core.ReadinessLog, Pattern: "listening", Timeout: core.Duration(time.Second)}
	h := depSeedWeb(t, old)
	h.Runtime.NextIDs = []string{"c-new"}
	h.Prober.Script("c-new", core.ProbeResult{}, errors.New("read logs: stream broken"))

	res, err := depDeploy(t, h, engine.DeployRequest{}, next)
	require.Error(t, err)
	assert.Equal(t, []string{"stop c-old", "remove c-old", "create c-new", "start c-new", "remove c-new"},
		h.Events.Seq("stop", "remove", "create", "start"))
	assert.Equal(t, "force", h.Events.Find("remove", "c-new")[0].Detail)
	assert.Len(t, h.Runtime.Created(), 1, "old never recreated")
	assert.Equal(t, engine.ResultFailed, res.Services[0].Result)
	// The replacement-pending marker stays until reconciliation (2.K).
	assert.Equal(t, core.MarkerReplacementPending, depMarkerReasons(h)["c-old"])
}

func TestS8_VolumeReplacementMarksSingleWriter(t *testing.T) {
	db := core.ServiceSpec{Name: "db", Image: "pg:16", TCP: []core.L4Interface{{Port: 9000, Publish: "0.0.0.0:9000"}},
		Volumes: []core.VolumeMount{{Name: "data", Path: "/var/lib/pg"}}}
	h := coretest.NewEngine(t)
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{9000: 19000}}

	res, err := depDeploy(t, h, engine.DeployRequest{}, db)
	require.NoError(t, err)
	assert.Equal(t, []core.Claim{{Port: 19000, Protocol: "tcp", Owner: core.ClaimOwnerBackend, App: "blog", Container: "c-new"}}, h.Store.ClaimsOf("c-new"))
	assert.True(t, res.Services[0].SingleWriter)
	own, err := h.Store.LoadOwnership(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.True(t, own.SingleWriter["db"])
	assert.Contains(t, own.Volumes, "gordon-blog-data")
}

func TestS9_MixedTCPAndUDPPublishesBothLoopbacks(t *testing.T) {
	game := core.ServiceSpec{Name: "game", Image: "game:1",
		TCP: []core.L4Interface{{Port: 9000, Publish: "0.0.0.0:9000"}},
		UDP: []core.L4Interface{{Port: 28015, Publish: "0.0.0.0:28015"}}}
	h := coretest.NewEngine(t)
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{9000: 19000}}
	h.Runtime.NextUDPBinds = []map[int]int{{28015: 19001}}

	res, err := depDeploy(t, h, engine.DeployRequest{}, game)
	require.NoError(t, err)
	assert.Equal(t, []core.PortSpec{{Port: 9000, Protocol: "tcp"}, {Port: 28015, Protocol: "udp"}}, h.Runtime.Created()[0].Ports)
	a, _ := h.Store.Active("blog")
	assert.Equal(t, map[int]int{9000: 19000}, a.Services["game"].BackendBinds)
	assert.Equal(t, map[int]int{28015: 19001}, a.Services["game"].UDPBackendBinds)
	assert.Equal(t, engine.FlowSequential, res.Services[0].Flow)
	assert.Equal(t, map[int]int{28015: 19001}, res.Services[0].UDPBackendBinds)
	assert.Len(t, h.Store.ClaimsOf("c-new"), 2)
}

func TestS10_FirstDeploymentRetiresNothing(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Runtime.NextIDs = []string{"c-new"}

	res, err := depDeploy(t, h, engine.DeployRequest{}, coretest.WebSpec(0))
	require.NoError(t, err)
	for _, k := range []string{"withdraw", "stop", "remove", "marker-save"} {
		assert.Equal(t, 0, h.Events.Count(k, ""), k)
	}
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
	assert.Equal(t, "", res.Services[0].Before)
	st := depLastOp(t, h).Step("service.web.replace")
	assert.Equal(t, "", st.Before)
	assert.Equal(t, "c-new", st.After)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
}

func TestS21_WithdrawalFailureBlocksMutation(t *testing.T) {
	old := coretest.WebSpec(0)
	seqVariants()["volume"](&old)
	next := depNewWeb(0)
	seqVariants()["volume"](&next)
	h := depSeedWeb(t, old)
	h.Traffic.FailApplies(1)

	res, err := depDeploy(t, h, engine.DeployRequest{}, next)
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	for _, k := range []string{"stop", "remove", "create", "start", "marker-save"} {
		assert.Equal(t, 0, h.Events.Count(k, ""), k)
	}
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.Equal(t, engine.ResultFailed, res.Services[0].Result)
	assert.Equal(t, "", depLastOp(t, h).Step("service.web.replace").After)
}

func TestS22_RetirementFailureBlocksReplacement(t *testing.T) {
	old := coretest.WebSpec(time.Second)
	seqVariants()["volume"](&old)
	next := depNewWeb(0)
	seqVariants()["volume"](&next)
	h := depSeedWeb(t, old)
	h.Runtime.Fail(coretest.MRemove, "c-old", errors.New("removal refused"), 1)

	res, err := depDeploy(t, h, engine.DeployRequest{}, next)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "c-old")
	assert.Contains(t, err.Error(), "removal refused")
	assert.Equal(t, core.MarkerReplacementPending, depMarkerReasons(h)["c-old"])
	assert.Equal(t, []coretest.StopCall{{ID: "c-old", Grace: time.Second}}, h.Runtime.Stops())
	assert.Equal(t, 0, h.Events.Count("create", ""))
	assert.NotEmpty(t, h.Store.ClaimsOf("c-old"))
	assert.Equal(t, core.OutcomeFailed, res.Outcome)
}

func TestS23_PreflightFailureLeavesTheWorkloadUntouched(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(h *coretest.Harness, s *core.ServiceSpec)
		pull   string
		want   string
	}{
		"missing secret": {func(h *coretest.Harness, s *core.ServiceSpec) {
			s.Secrets = []core.SecretRef{{Env: "DB_PASSWORD", Name: "db-password"}}
		}, "", "db-password"},
		"image absent with pull never": {func(h *coretest.Harness, s *core.ServiceSpec) {
			h.Runtime.Fail(coretest.MResolve, "", notFoundErr(s.Image), 0)
		}, engine.PullNever, "registry.example/blog:1.5"},
		"bind refused by missing policy": {func(h *coretest.Harness, s *core.ServiceSpec) {
			s.Binds = []core.BindMount{{Name: "config", Path: "/etc/app"}}
		}, "", "no bind policy"},
		"pull fails": {func(h *coretest.Harness, s *core.ServiceSpec) {
			h.Runtime.Fail(coretest.MPull, "", errors.New("registry unreachable"), 0)
		}, engine.PullAlways, "registry unreachable"},
	} {
		t.Run(name, func(t *testing.T) {
			h := depSeedWeb(t, coretest.WebSpec(0))
			next := depNewWeb(0)
			tc.mutate(h, &next)
			res, err := depDeploy(t, h, engine.DeployRequest{Pull: tc.pull}, next)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "preflight")
			for _, k := range []string{"withdraw", "create", "start", "stop", "remove", "marker-save"} {
				assert.Equal(t, 0, h.Events.Count(k, ""), k)
			}
			assert.Equal(t, 0, h.Store.Saves("SaveActive"))
			assert.Equal(t, core.OutcomeFailed, res.Outcome)
			op := depLastOp(t, h)
			assert.Equal(t, core.StepFailed, op.Step(engine.StepPreflight).State)
			assert.Nil(t, op.Step("service.web.replace"), "no pinned table after a failed preflight")
			assert.True(t, h.Runtime.Running("c-old"))
		})
	}
}

func TestS24_MultiServiceStopsAtFirstFailure(t *testing.T) {
	alpha, beta, gamma := coretest.WebSpec(0), coretest.WebSpec(0), coretest.WebSpec(0)
	alpha.Name, beta.Name, gamma.Name = "alpha", "beta", "gamma"
	alpha.HTTP[0].Host, beta.HTTP[0].Host, gamma.HTTP[0].Host = "a.example.com", "b.example.com", "c.example.com"
	h := coretest.NewEngine(t)
	h.Runtime.NextIDs = []string{"c-alpha", "c-beta", "c-gamma"}
	h.Prober.Script("c-beta", core.ProbeResult{}, errors.New("connection refused"))

	res, err := depDeploy(t, h, engine.DeployRequest{}, alpha, beta, gamma)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "service beta")
	assert.Equal(t, "force", h.Events.Find("remove", "c-beta")[0].Detail)
	assert.Empty(t, h.Store.ClaimsOf("c-beta"))
	assert.True(t, h.Runtime.Running("c-alpha"))
	assert.False(t, h.Runtime.Exists("c-gamma"))
	a, _ := h.Store.Active("blog")
	assert.Equal(t, "c-alpha", a.Services["alpha"].Container)
	assert.Nil(t, a.Services["gamma"])
	require.Len(t, res.Services, 2)
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
	assert.Equal(t, engine.ResultFailed, res.Services[1].Result)
	assert.Equal(t, core.OutcomePartial, res.Outcome)
	op := depLastOp(t, h)
	assert.Equal(t, core.StepPending, op.Step("service.gamma.replace").State, "later services untouched")
	assert.Equal(t, core.OutcomePartial, op.Outcome)
}

func TestS25_DigestChangeReplaces(t *testing.T) {
	old := coretest.WebSpec(0)
	seqVariants()["volume"](&old)
	next := old
	next.Image = "registry.example/blog:1.5"
	h := depSeedWeb(t, old)
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18081}}

	res, err := depDeploy(t, h, engine.DeployRequest{}, next)
	require.NoError(t, err)
	// The planner observes c-old first, retirement reads its labels (for
	// its file-secret copies) before stopping it; every start is followed by
	// an inspect (S31).
	assert.Equal(t, []string{"inspect c-old", "inspect c-old", "stop c-old", "remove c-old", "create c-new", "start c-new", "inspect c-new"},
		h.Events.Seq("stop", "remove", "create", "start", "inspect")[:7])
	assert.Equal(t, map[int]int{8080: 18081}, res.Services[0].BackendBinds)

	t.Run("identical running container is unchanged", func(t *testing.T) {
		h.Reset()
		res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
		require.NoError(t, err)
		assert.Equal(t, engine.ResultUnchanged, res.Services[0].Result)
		assert.Equal(t, "c-new", res.Services[0].After)
		for _, k := range []string{"create", "start", "stop", "remove", "withdraw"} {
			assert.Equal(t, 0, h.Events.Count(k, ""), k)
		}
	})
}

// TestS26_PinnedPullAndCommandReplacesCMD: command replaces only the
// image's CMD (compose's and docker run's meaning); the image's ENTRYPOINT
// still runs, and an explicit entrypoint replaces it.
func TestS26_PinnedPullAndCommandReplacesCMD(t *testing.T) {
	worker := core.ServiceSpec{Name: "worker", Image: "registry.example/worker@sha256:abc", Command: []string{"/worker", "--queue=jobs"}}
	h := coretest.NewEngine(t)
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(worker), "s26")
	require.NoError(t, err)
	h.Reset()

	// missing: the first resolve is not found → pull, resolve again.
	// (Two misses: preflight's image-config check resolves before anything
	// changes, then pinning resolves again.)
	h.Runtime.Fail(coretest.MResolve, "registry.example/worker@sha256:abc", notFoundErr("registry.example/worker@sha256:abc"), 2)
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, 1, h.Events.Count("pull", "registry.example/worker@sha256:abc"))
	cs := h.Runtime.Created()
	require.Len(t, cs, 1)
	assert.Equal(t, []string{"/worker", "--queue=jobs"}, cs[0].Cmd)
	assert.Nil(t, cs[0].Entrypoint, "the image's ENTRYPOINT is kept")
	assert.Empty(t, cs[0].Command, "the legacy entrypoint-replacing field is not used for workloads")
	assert.Equal(t, "unless-stopped", cs[0].RestartPolicy)
	assert.Equal(t, "SIGTERM", cs[0].StopSignal)
	assert.Equal(t, &core.Logging{Driver: "json-file", Options: map[string]string{"max-size": "10m", "max-file": "3"}}, cs[0].Options.Logging)
	assert.Equal(t, "registry.example/worker@sha256:abc", cs[0].Image)
	assert.Equal(t, 0, h.Runtime.Calls(coretest.MBinds), "no binds read without backend ports")
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
	assert.Equal(t, "sha256:abc", depLastOp(t, h).Step("service.worker.replace").Digest)
}

func notFoundErr(ref string) error { return errors.Join(errors.New("image "+ref), core.ErrNotFound) }

func TestS27_HTTPSuccessRecordsLoopbackBinds(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.NextBinds = []map[int]int{{8080: 18080}}

	_, err := depDeploy(t, h, engine.DeployRequest{}, coretest.WebSpec(0))
	require.NoError(t, err)
	assert.Equal(t, []core.Claim{{Port: 18080, Protocol: "tcp", Owner: core.ClaimOwnerBackend, App: "blog", Container: "c-new"}}, h.Store.ClaimsOf("c-new"))
	require.NotEmpty(t, h.Prober.Requests())
	assert.Equal(t, "127.0.0.1:18080", h.Prober.Requests()[0].Target.Address)
	rec, err := h.Store.LoadRecovery(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, core.VerifiedExecution{Container: "c-new", StartedAt: coretest.T0}, rec.Verified["web"])
}

func TestS28_EnvAndSecretsInjected(t *testing.T) {
	web := coretest.WebSpec(0)
	web.Secrets = []core.SecretRef{{Env: "DB_PASSWORD", Name: "db-password"}}
	h := coretest.NewEngine(t)
	_, err := h.Store.EnsureApp(h.Ctx(), "blog")
	require.NoError(t, err)
	require.NoError(t, h.Store.SetSecret(h.Ctx(), "blog", "web", "db-password", []byte("s3cret")))
	app := coretest.BlogApp(web)
	app.Env = map[string]string{"MODE": "prod"}
	_, err = h.Engine.SubmitRevision(h.Ctx(), app, "s28")
	require.NoError(t, err)

	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	cs := h.Runtime.Created()
	require.Len(t, cs, 1)
	assert.Equal(t, []string{"DB_PASSWORD=s3cret", "MODE=prod"}, cs[0].Env)
	op := depLastOp(t, h)
	for _, s := range op.Steps {
		assert.NotContains(t, s.Detail+s.Error, "s3cret")
	}
}

func TestS32_CandidateJournaledBeforeStart(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}

	_, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)
	start := h.Events.Index("start", "c-new")
	require.Greater(t, start, 0)
	found := false
	for i, e := range h.Events.List()[:start] {
		if e.Kind == "journal-save" && strings.Contains(e.Detail, `{"id":"service.web.replace","state":"pending","after":"c-new"}`) {
			found = true
			assert.Greater(t, i, h.Events.Index("create", "c-new"))
		}
	}
	assert.True(t, found, h.Events.String())
}
