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

// scale: the serving revision is stored again with the new count and
// deployed: 1 → 3 → 2 instances, each a whole new set switched to at once,
// the app's other services untouched.
func TestScale_ChangesTheInstanceCountByADeploy(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	lcDeployV15(t, h)
	one := repInstances(t, h)[0].Container

	res, err := h.Engine.Scale(h.Ctx(), engine.ScaleRequest{App: "blog", Replicas: map[string]int{"web": 3}})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, core.OpDeploy, res.Op.Kind, "journaled as a deploy")
	ins := repInstances(t, h)
	require.Len(t, ins, 3)
	assert.False(t, h.Runtime.Exists(one))
	assert.Len(t, repRouted(t, h), 3)
	a, _ := h.Store.Active("blog")
	assert.Equal(t, coretest.DigestFor("registry.example/blog:1.5"), a.Services["web"].Digest, "the pinned digest is kept")

	_, err = h.Engine.Scale(h.Ctx(), engine.ScaleRequest{App: "blog", Replicas: map[string]int{"web": 2}})
	require.NoError(t, err)
	assert.Len(t, repInstances(t, h), 2)
	assert.Len(t, repRouted(t, h), 2)
}

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
