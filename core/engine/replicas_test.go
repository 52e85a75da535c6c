package engine_test

import (
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// repWeb is the stateless web spec at a new image with n instances.
func repWeb(n int) core.ServiceSpec {
	s := depNewWeb(0)
	s.Replicas = n
	return s
}

// repSeedSet seeds blog's web serving as the instances ids, instance i
// bound to host port 17000+i.
func repSeedSet(t *testing.T, ids ...string) *coretest.Harness {
	t.Helper()
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.SetBinds(ids[0], map[int]int{8080: 17000})
	a, ok := h.Store.Active("blog")
	require.True(t, ok)
	web := a.Services["web"]
	web.Container, web.BackendBinds = ids[0], map[int]int{8080: 17000}
	for i, id := range ids[1:] {
		binds := map[int]int{8080: 17001 + i}
		h.Runtime.AddContainer(id, core.ContainerState{}, binds)
		web.Replicas = append(web.Replicas, core.Instance{Container: id, BackendBinds: binds})
	}
	require.NoError(t, h.Store.SaveActive(h.Ctx(), a))
	return h
}

func repInstances(t *testing.T, h *coretest.Harness) []core.Instance {
	t.Helper()
	a, ok := h.Store.Active("blog")
	require.True(t, ok)
	return a.Services["web"].Instances()
}

func repRouted(t *testing.T, h *coretest.Harness) []string {
	t.Helper()
	var out []string
	for _, r := range h.Traffic.Last().HTTP {
		if r.Host == "blog.example.com" {
			for _, b := range r.Backends {
				out = append(out, b.Container)
			}
		}
	}
	sort.Strings(out)
	return out
}

func repIDs(ins []core.Instance) []string {
	var out []string
	for _, in := range ins {
		out = append(out, in.Container)
	}
	sort.Strings(out)
	return out
}

// A deploy of replicas = 3 creates three candidates, probes each, publishes
// all three in one ACTIVE record, routes the host to all three at once and
// only then retires the predecessor.
func TestReplicas_DeployCreatesProbesAndRoutesEveryInstance(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-a", "c-b", "c-c"}

	_, err := depDeploy(t, h, engine.DeployRequest{}, repWeb(3))
	require.NoError(t, err)

	ins := repInstances(t, h)
	require.Len(t, ins, 3)
	assert.Equal(t, []string{"c-a", "c-b", "c-c"}, repIDs(ins))
	ports := map[int]bool{}
	for _, in := range ins {
		ports[in.BackendBinds[8080]] = true
		assert.True(t, h.Runtime.Running(in.Container), in.Container)
	}
	assert.Len(t, ports, 3, "each instance has its own bind: %v", ins)
	assert.Equal(t, []string{"c-a", "c-b", "c-c"}, repRouted(t, h))
	probed := map[string]bool{}
	for _, r := range h.Prober.Requests() {
		probed[r.Target.ContainerID] = true
	}
	assert.Len(t, probed, 3, "every instance probed: %v", probed)
	// the old one is retired after the one switch to the whole set
	assert.False(t, h.Runtime.Exists("c-old"))
	assert.Less(t, h.Events.Index("traffic", ""), h.Events.Index("stop", "c-old"))
	assert.Empty(t, depMarkerReasons(h))
	op := depLastOp(t, h)
	st := op.Step(engine.ServiceStepID("web", "replace"))
	require.NotNil(t, st)
	assert.Len(t, st.Replicas, 2, "the replica candidates are journaled beside After")
	assert.Equal(t, core.OutcomeSuccess, op.Outcome)
}

// One instance that fails fails the deploy: every candidate is removed,
// nothing is published, and the old set keeps serving.
func TestReplicas_OneFailingCandidateFailsTheDeployAndTheOldSetServes(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-old2")
	h.Runtime.NextIDs = []string{"c-a", "c-b", "c-c"}
	h.Runtime.Fail("start", "c-b", errors.New("boom"), 1)

	_, err := depDeploy(t, h, engine.DeployRequest{}, repWeb(3))
	require.Error(t, err)

	assert.Equal(t, []string{"c-old", "c-old2"}, repIDs(repInstances(t, h)))
	for _, id := range []string{"c-a", "c-b", "c-c"} {
		assert.False(t, h.Runtime.Exists(id), "candidate %s removed", id)
	}
	assert.True(t, h.Runtime.Running("c-old") && h.Runtime.Running("c-old2"))
	assert.Empty(t, depMarkerReasons(h))
	assert.Equal(t, 0, h.Traffic.Applied(), "nothing routed")
}

// An overlap replacement of a set retires every old instance after the
// switch; scaling down is a deploy with fewer replicas.
func TestReplicas_OverlapRetiresTheWholeOldSet(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-old2", "c-old3")
	h.Runtime.NextIDs = []string{"c-a", "c-b"}

	_, err := depDeploy(t, h, engine.DeployRequest{}, repWeb(2))
	require.NoError(t, err)

	assert.Equal(t, []string{"c-a", "c-b"}, repIDs(repInstances(t, h)))
	assert.Equal(t, []string{"c-a", "c-b"}, repRouted(t, h))
	traffic := h.Events.Index("traffic", "")
	for _, id := range []string{"c-old", "c-old2", "c-old3"} {
		assert.False(t, h.Runtime.Exists(id), "%s retired", id)
		assert.Less(t, traffic, h.Events.Index("stop", id), "%s stopped after the switch", id)
	}
	assert.Empty(t, depMarkerReasons(h))
}

// The same revision with fewer instances running than it asks for is not
// unchanged: the plan says why and the deploy restores the set.
func TestReplicas_MissingInstanceIsNotUnchanged(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-old2")
	spec := coretest.WebSpec(0)
	spec.Replicas = 3
	h.Runtime.NextIDs = []string{"c-a", "c-b", "c-c"}
	res, err := depDeploy(t, h, engine.DeployRequest{}, spec)
	require.NoError(t, err)
	require.Len(t, res.Services, 1)
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
	assert.Len(t, repInstances(t, h), 3)
}

// Stop retires every instance; the replicas leave ACTIVE (start brings the
// primary back; the next deploy restores the set). Remove removes them all.
func TestReplicas_StopAndRemoveRetireEveryInstance(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-old2")
	_, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.False(t, h.Runtime.Exists("c-old2"))
	assert.Empty(t, repInstances(t, h)[1:])

	h = repSeedSet(t, "c-old", "c-old2")
	_, err = h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.False(t, h.Runtime.Exists("c-old") || h.Runtime.Exists("c-old2"))
}

// R47 for replicas: an interrupted deploy's replica candidates that ACTIVE
// does not name are removed; the serving set is kept.
func TestR47_UnpublishedReplicaCandidatesAreRemoved(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-old2")
	h.Runtime.AddContainer("c-new", core.ContainerState{}, map[int]int{8080: 18000})
	h.Runtime.AddContainer("c-new2", core.ContainerState{}, map[int]int{8080: 18001})
	h.SeedOp(core.Operation{ID: "op-1", Kind: core.OpDeploy, App: "blog", StartedAt: time.Now(), Steps: []core.Step{{
		ID: engine.ServiceStepID("web", "replace"), State: core.StepPending, Service: "web",
		Before: "c-old", After: "c-new", Replicas: []string{"c-new2"},
	}}})
	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	assert.False(t, h.Runtime.Exists("c-new"))
	assert.False(t, h.Runtime.Exists("c-new2"))
	assert.True(t, h.Runtime.Running("c-old") && h.Runtime.Running("c-old2"))
	op := depLastOp(t, h)
	assert.Equal(t, core.OutcomeFailed, op.Outcome)
	assert.Empty(t, op.Steps[0].Replicas)
}

// BuildGraph: a TCP route of a service with several instances lists every
// instance as a backend; the first is also Backend.
func TestR21_GraphRoutesEveryInstance(t *testing.T) {
	spec := coretest.WebSpec(0)
	spec.TCP = []core.L4Interface{{Port: 9000, Publish: "0.0.0.0:9000"}}
	a := core.Active{App: "blog", Services: map[string]*core.ActiveService{"web": {
		Container: "c-1", Spec: spec, BackendBinds: map[int]int{8080: 18000, 9000: 19000},
		Replicas: []core.Instance{{Container: "c-2", BackendBinds: map[int]int{8080: 18001, 9000: 19001}}, {Container: "c-3"}},
	}}}
	g := engine.BuildGraph([]core.Active{a})
	require.Len(t, g.HTTP, 1)
	require.Len(t, g.TCP, 1)
	var http []string
	for _, b := range g.HTTP[0].Backends {
		http = append(http, b.Addr+"="+b.Container)
	}
	assert.Equal(t, []string{"127.0.0.1:18000=c-1", "127.0.0.1:18001=c-2"}, http, "a withdrawn instance (no binds) is not routed")
	assert.Equal(t, "127.0.0.1:19000", g.TCP[0].Backend)
	assert.True(t, slices.ContainsFunc(g.TCP[0].L4Backends(), func(b routetable.Backend) bool { return b.Addr == "127.0.0.1:19001" && b.Container == "c-2" }))
}

// R69 incremental scale: the serving revision is stored again with the new
// count and deployed as a scale of the serving generation. 1 → 3 keeps the
// serving instance (same container, never stopped) and adds two, created
// and probed before they are routed beside it; 3 → 2 drops the last
// instance from ACTIVE and the routes before it is stopped, and keeps the
// other two. Journaled as a deploy whose verb is scale and whose step
// reads flow scale (ops and revisions show it as scale).
func TestR69_ScaleAddsAndRemovesInstancesOfTheServingGeneration(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	lcDeployV15(t, h)
	one := repInstances(t, h)[0].Container
	h.Runtime.NextIDs = []string{"c-s2", "c-s3"}
	h.Reset()

	res, err := h.Engine.Scale(h.Ctx(), engine.ScaleRequest{App: "blog", Replicas: map[string]int{"web": 3}})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, core.OpDeploy, res.Op.Kind, "journaled as a deploy")
	assert.Equal(t, "scale", res.Op.VerbOrKind(), "shown as scale")
	require.Len(t, res.Services, 1)
	assert.Equal(t, engine.FlowScale, res.Services[0].Flow)
	ins := repInstances(t, h)
	require.Len(t, ins, 3)
	assert.Equal(t, one, ins[0].Container, "the serving instance stays the primary")
	assert.Equal(t, []string{one, "c-s2", "c-s3"}, repIDs(ins))
	require.Len(t, res.Services[0].Instances, 3, "the result lists every serving instance")
	assert.Equal(t, one, res.Services[0].Instances[0], "the primary first")
	assert.ElementsMatch(t, []string{one, "c-s2", "c-s3"}, res.Services[0].Instances)
	assert.True(t, h.Runtime.Running(one))
	assert.Equal(t, -1, h.Events.Index("stop", one), "the serving instance is never stopped")
	assert.Equal(t, []string{one, "c-s2", "c-s3"}, repRouted(t, h))
	probed := map[string]bool{}
	for _, r := range h.Prober.Requests() {
		probed[r.Target.ContainerID] = true
	}
	assert.True(t, probed["c-s2"] && probed["c-s3"], "each new instance is probed: %v", probed)
	for _, id := range []string{"c-s2", "c-s3"} {
		assert.Less(t, h.Events.Index("start", id), h.Events.Index("traffic", ""), "%s started before the route", id)
	}
	st := res.Op.Step(engine.ServiceStepID("web", "replace"))
	require.NotNil(t, st)
	assert.ElementsMatch(t, []string{"c-s2", "c-s3"}, st.Replicas, "the new instances are journaled before their start")
	a, _ := h.Store.Active("blog")
	assert.Equal(t, coretest.DigestFor("registry.example/blog:1.5"), a.Services["web"].Digest, "the pinned digest is kept")
	assert.Equal(t, 3, a.Services["web"].Spec.Instances())
	assert.Equal(t, res.Op.Revision, a.Services["web"].EffectiveRevision)

	h.Reset()
	res, err = h.Engine.Scale(h.Ctx(), engine.ScaleRequest{App: "blog", Replicas: map[string]int{"web": 2}})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	last := ins[2].Container
	assert.Equal(t, repIDs(ins[:2]), repIDs(repInstances(t, h)), "the first two instances are kept")
	assert.ElementsMatch(t, repIDs(ins[:2]), res.Services[0].Instances)
	assert.NotContains(t, repRouted(t, h), last)
	assert.False(t, h.Runtime.Exists(last), "the surplus instance is retired")
	assert.Less(t, h.Events.Index("traffic", ""), h.Events.Index("stop", last), "withdrawn before it is stopped")
	assert.True(t, h.Runtime.Running(one) && h.Runtime.Running(ins[1].Container))
	assert.Empty(t, depMarkerReasons(h))
}

// R69: a new instance that fails its start fails the scale; every instance
// it created is removed, and the serving set, ACTIVE and the routes are as
// they were.
func TestR69_FailedScaleUpLeavesTheServingSetAsItWas(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	lcDeployV15(t, h)
	before, _ := h.Store.Active("blog")
	one := repInstances(t, h)[0].Container
	h.Runtime.NextIDs = []string{"c-s2", "c-s3"}
	h.Runtime.Fail("start", "c-s3", errors.New("boom"), 1)
	h.Reset()
	applied := h.Traffic.Applied()

	_, err := h.Engine.Scale(h.Ctx(), engine.ScaleRequest{App: "blog", Replicas: map[string]int{"web": 3}})
	require.Error(t, err)
	assert.ErrorContains(t, err, "boom")
	assert.False(t, h.Runtime.Exists("c-s2") || h.Runtime.Exists("c-s3"), "the new instances are removed")
	assert.True(t, h.Runtime.Running(one))
	after, _ := h.Store.Active("blog")
	assert.Equal(t, before.Services["web"].Instances(), after.Services["web"].Instances())
	assert.Equal(t, applied, h.Traffic.Applied(), "nothing routed")
}

// R69 + R47: a scale-up cut short after its new instance was journaled and
// started, before the publish: reconcile removes the new instance and keeps
// the serving one.
func TestR47_InterruptedScaleUpRemovesTheUnpublishedInstance(t *testing.T) {
	h := repSeedSet(t, "c-old")
	h.Runtime.AddContainer("c-s2", core.ContainerState{}, map[int]int{8080: 18001})
	h.SeedOp(core.Operation{ID: "op-1", Kind: core.OpDeploy, App: "blog", StartedAt: time.Now(), Steps: []core.Step{{
		ID: engine.ServiceStepID("web", "replace"), State: core.StepPending, Service: "web",
		Before: "c-old", After: "c-old", Replicas: []string{"c-s2"},
	}}})
	require.NoError(t, h.Engine.ExpReconcileInterrupted(h.Ctx(), "blog", ""))
	assert.False(t, h.Runtime.Exists("c-s2"))
	assert.True(t, h.Runtime.Running("c-old"))
	assert.Equal(t, []string{"c-old"}, repIDs(repInstances(t, h)))
}

// R69: a deploy that changes anything besides the count replaces the whole
// set by overlap; one that changes only the count scales.
func TestR69_PlanScalesOnlyWhenOnlyTheCountChanges(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-old2")
	cur := coretest.WebSpec(0)
	cur.Replicas = 2
	a, _ := h.Store.Active("blog")
	a.Services["web"].Spec = cur
	require.NoError(t, h.Store.SaveActive(h.Ctx(), a))

	three := cur
	three.Replicas = 3
	newImage := depNewWeb(0)
	newImage.Replicas = 3
	for spec, want := range map[*core.ServiceSpec]engine.Action{&three: engine.ActionScale, &newImage: engine.ActionOverlap} {
		p, err := h.Engine.PlanDeploy(h.Ctx(), engine.DeployRequest{App: "blog", Spec: ptr(coretest.BlogApp(*spec))})
		require.NoError(t, err)
		require.Len(t, p.Services, 1)
		assert.Equal(t, want, p.Services[0].Action, "%s: %s", spec.Image, p.Services[0].Reason)
	}
}

func ptr[T any](v T) *T { return &v }

// scale refuses more than one instance of a single-writer service, an
// unknown service and a count out of range, and changes nothing.
func TestScale_RefusalsChangeNothing(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	db := coretest.WebSpec(0)
	db.Image = "registry.example/blog:1.5"
	db.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
	_, err := depDeploy(t, h, engine.DeployRequest{}, db)
	require.NoError(t, err)
	before, _ := h.Store.Active("blog")
	revs, err := h.Store.ListRevisions(h.Ctx(), "blog")
	require.NoError(t, err)

	for req, want := range map[string]error{"web=3": core.ErrInvalid, "api=2": core.ErrNotFound, "web=0": core.ErrInvalid} {
		name, n := req[:3], int(req[4]-'0')
		_, err := h.Engine.Scale(h.Ctx(), engine.ScaleRequest{App: "blog", Replicas: map[string]int{name: n}})
		require.ErrorIs(t, err, want, req)
	}
	_, err = h.Engine.Scale(h.Ctx(), engine.ScaleRequest{App: "blog", Replicas: map[string]int{"web": 3}})
	assert.ErrorContains(t, err, "web runs one instance (single-writer: volume data)")
	after, _ := h.Store.Active("blog")
	assert.Equal(t, before, after)
	again, err := h.Store.ListRevisions(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Len(t, again, len(revs), "no revision stored")
}

// The periodic pass follows a replica the engine moved: new loopback
// binds are probed, persisted and routed; a replica that is gone leaves
// ACTIVE and the routes; one that exited is withdrawn and started again.
func TestR41_PeriodicPassRefreshesReplicas(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-moved", "c-gone", "c-exited")
	h.Runtime.SetBinds("c-moved", map[int]int{8080: 17555})
	require.NoError(t, h.Runtime.RemoveContainer(h.Ctx(), "c-gone", true))
	require.NoError(t, h.Runtime.StopContainer(h.Ctx(), "c-exited", time.Second))

	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)

	ins := repInstances(t, h)
	assert.Equal(t, []string{"c-exited", "c-moved", "c-old"}, repIDs(ins))
	for _, in := range ins {
		switch in.Container {
		case "c-moved":
			assert.Equal(t, map[int]int{8080: 17555}, in.BackendBinds)
		case "c-exited":
			assert.Empty(t, in.BackendBinds, "withdrawn until it runs again")
		}
	}
	assert.True(t, h.Runtime.Running("c-exited"), "started again")
	assert.Equal(t, []string{"c-moved", "c-old"}, repRouted(t, h))
	var addrs []string
	for _, r := range h.Traffic.Last().HTTP {
		for _, b := range r.Backends {
			addrs = append(addrs, b.Addr)
		}
	}
	assert.Contains(t, addrs, "127.0.0.1:17555")

	// The next pass reads the restarted replica's binds and routes it.
	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.Equal(t, []string{"c-exited", "c-moved", "c-old"}, repRouted(t, h))
}

// R41 with R69: when the primary instance exits (its node is lost, its
// process dies), the pass withdraws only the primary: the replicas stay
// routed in every table it applies, and the primary is routed again once
// it is back.
func TestR41_RecoveringThePrimaryKeepsTheReplicasRouted(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-r1", "c-r2")
	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	require.Equal(t, []string{"c-old", "c-r1", "c-r2"}, repRouted(t, h))
	require.NoError(t, h.Runtime.StopContainer(h.Ctx(), "c-old", time.Second))
	before := len(h.Traffic.Graphs())

	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	graphs := h.Traffic.Graphs()[before:]
	require.NotEmpty(t, graphs, "the pass applied tables")
	for i, g := range graphs {
		var routed []string
		for _, r := range g.HTTP {
			for _, b := range r.Backends {
				routed = append(routed, b.Container)
			}
		}
		assert.Subset(t, routed, []string{"c-r1", "c-r2"}, "table %d keeps the replicas", i)
	}
	assert.True(t, h.Runtime.Running("c-old"), "the primary was started again")
	assert.Equal(t, []string{"c-old", "c-r1", "c-r2"}, repRouted(t, h), "and routed again once verified")
}

// R47 (containers no record owns) with R69: a reconcile pass after a
// deploy of replicas = 3 keeps every instance ACTIVE names, replicas
// included, and still removes a stray container of the app.
func TestR47_ReconcileKeepsEveryReplicaAndRemovesOnlyTheStray(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-a", "c-b", "c-c"}
	_, err := depDeploy(t, h, engine.DeployRequest{}, repWeb(3))
	require.NoError(t, err)
	workloadOf(h, "c-stray", "blog", "web")

	reps, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	require.Len(t, reps, 1)
	assert.Equal(t, []string{"c-stray"}, reps[0].Removed, "the report names what the pass removed")
	for _, id := range []string{"c-a", "c-b", "c-c"} {
		assert.True(t, h.Runtime.Running(id), "instance %s keeps running", id)
		assert.Equal(t, -1, h.Events.Index("remove", id), "instance %s not removed", id)
	}
	assert.Equal(t, []string{"c-a", "c-b", "c-c"}, repIDs(repInstances(t, h)))
	assert.False(t, h.Runtime.Exists("c-stray"), "the stray is removed")
}
