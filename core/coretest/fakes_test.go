package coretest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// TestRuntime_LifecycleEffects: create/start/stop/remove append effects in
// order, IDs and binds come from the scripts, not-found is ErrNotFound.
func TestRuntime_LifecycleEffects(t *testing.T) {
	ctx := context.Background()
	ev := &Events{}
	r := NewRuntime(ev)
	r.NextIDs = []string{"c-new"}
	r.NextBinds = []map[int]int{{8080: 18081}}
	spec := core.ContainerSpec{Name: "gordon-blog-web-op1", Image: "blog@sha256:1",
		Ports: []core.PortSpec{{Port: 8080, Protocol: "tcp"}}}
	id, err := r.CreateContainer(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, "c-new", id)
	id2, err := r.CreateContainer(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, "c-1", id2, "default IDs after NextIDs")
	require.NoError(t, r.StartContainer(ctx, "c-new"))
	st, err := r.InspectContainer(ctx, "c-new")
	require.NoError(t, err)
	assert.True(t, st.Running())
	assert.Equal(t, T0, st.StartedAt)
	b, err := r.BackendBinds(ctx, "c-new", spec.Ports)
	require.NoError(t, err)
	assert.Equal(t, []core.BackendBind{{ContainerPort: 8080, HostPort: 18081, Protocol: "tcp"}}, b)
	b2, err := r.BackendBinds(ctx, "c-1", spec.Ports)
	require.NoError(t, err)
	assert.Equal(t, 18080, b2[0].HostPort, "default binds count up from 18080")
	_, err = r.BackendBinds(ctx, "c-new", []core.PortSpec{{Port: 9999, Protocol: "tcp"}})
	require.Error(t, err)

	require.Error(t, r.RemoveContainer(ctx, "c-new", false), "running container needs force")
	require.NoError(t, r.StopContainer(ctx, "c-new", 45*time.Second))
	require.NoError(t, r.RemoveContainer(ctx, "c-new", false))
	assert.ErrorIs(t, r.StopContainer(ctx, "c-new", time.Second), core.ErrNotFound)
	_, err = r.InspectContainer(ctx, "c-new")
	assert.ErrorIs(t, err, core.ErrNotFound)

	assert.Equal(t, []string{"create c-new", "create c-1", "start c-new", "stop c-new", "remove c-new"},
		ev.Seq("create", "start", "stop", "remove"))
	assert.Equal(t, "45s", ev.Find("stop", "c-new")[0].Detail)
	assert.Equal(t, []StopCall{{ID: "c-new", Grace: 45 * time.Second}}, r.Stops())
	assert.Len(t, r.Created(), 2)
	assert.False(t, r.Exists("c-new"))
	assert.True(t, r.Exists("c-1"))
}

// TestRuntime_FailAndInspectSeq: failures are consumed per call and logged
// as "<kind>-failed"; an inspect script is consumed in order, the last
// state repeating (S45/S46).
func TestRuntime_FailAndInspectSeq(t *testing.T) {
	ctx := context.Background()
	ev := &Events{}
	r := NewRuntime(ev)
	r.AddContainer("c-old", core.ContainerState{}, map[int]int{8080: 17000})
	boom := errors.New("boom")
	r.Fail(MRemove, "c-old", boom, 1)
	require.NoError(t, r.StopContainer(ctx, "c-old", time.Second))
	require.ErrorIs(t, r.RemoveContainer(ctx, "c-old", false), boom)
	assert.True(t, r.Exists("c-old"))
	require.NoError(t, r.RemoveContainer(ctx, "c-old", false))
	assert.Equal(t, 2, r.Calls(MRemove))
	assert.Equal(t, []string{"remove-failed c-old", "remove c-old"}, ev.Seq("remove", "remove-failed"))

	r.AddContainer("c-new", core.ContainerState{}, nil)
	r.InspectSeq("c-new", core.ContainerState{Status: core.StatusRestarting},
		core.ContainerState{Status: core.StatusRunning, StartedAt: T0.Add(time.Minute)})
	var got []string
	for i := 0; i < 3; i++ {
		st, err := r.InspectContainer(ctx, "c-new")
		require.NoError(t, err)
		assert.Equal(t, "c-new", st.ID)
		got = append(got, st.Status)
	}
	assert.Equal(t, []string{"restarting", "running", "running"}, got)

	r.SetStartTime("c-new", T0.Add(time.Hour))
	require.NoError(t, r.RestartContainer(ctx, "c-new", time.Second))
	st, ok := r.State("c-new")
	require.True(t, ok)
	assert.Equal(t, T0.Add(time.Hour), st.StartedAt)
}

// TestRuntime_LogsForFutureContainer: logs preset for an ID not created yet
// apply once it is created; Tail keeps the last lines.
func TestRuntime_LogsForFutureContainer(t *testing.T) {
	ctx := context.Background()
	r := NewRuntime(nil)
	r.NextIDs = []string{"c-new"}
	r.LogsFor("c-new", "starting", "boom")
	_, err := r.CreateContainer(ctx, core.ContainerSpec{})
	require.NoError(t, err)
	var lines []string
	require.NoError(t, r.Logs(ctx, "c-new", core.LogOptions{Tail: 1}, func(l core.LogLine) error {
		lines = append(lines, l.Text)
		return nil
	}))
	assert.Equal(t, []string{"boom"}, lines)
}

// TestProber_ScriptsAndRecords: per-container scripts win over the default;
// every request is recorded; events say ready/probe-failed.
func TestProber_ScriptsAndRecords(t *testing.T) {
	ctx := context.Background()
	ev := &Events{}
	p := NewProber(ev)
	p.SetResult("c-bad", false, "503")
	set := NewProbeSet(p)
	pr, err := set.Prober(ctx, core.ReadinessHTTP, "")
	require.NoError(t, err)
	res, err := pr.Check(ctx, core.ProbeRequest{Target: core.ProbeTarget{ContainerID: "c-bad", Address: "127.0.0.1:18080"}})
	require.NoError(t, err)
	assert.False(t, res.Ready)
	res, err = pr.Check(ctx, core.ProbeRequest{Target: core.ProbeTarget{ContainerID: "c-new", Address: "127.0.0.1:18081"}})
	require.NoError(t, err)
	assert.True(t, res.Ready)
	assert.Equal(t, []string{"127.0.0.1:18080", "127.0.0.1:18081"}, p.Addresses())
	assert.Equal(t, []string{"probe-failed c-bad", "ready c-new"}, ev.Seq("ready", "probe-failed"))
	set.Remove("log")
	_, err = set.Prober(ctx, "log", "")
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.Equal(t, []string{"http", "log"}, set.Asked())
}

// TestTraffic_RecordsAcceptedGraphs: generations increase; failed applies
// record nothing; in-flight scripts drain.
func TestTraffic_RecordsAcceptedGraphs(t *testing.T) {
	ctx := context.Background()
	ev := &Events{}
	tr := NewTraffic(ev)
	g := routetable.Graph{HTTP: []routetable.HTTPRoute{{Host: "blog.example.com", App: "blog", Service: "web",
		Backends: []routetable.Backend{{Addr: "127.0.0.1:18081", Container: "c-new"}}}}}
	tr.FailApplies(1)
	_, err := tr.Apply(ctx, g)
	require.ErrorIs(t, err, core.ErrUnavailable)
	gen, err := tr.Apply(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), gen)
	assert.Equal(t, 1, tr.Applied())
	assert.Equal(t, 2, tr.Attempts())
	assert.Equal(t, []int{18081}, HostPorts(tr.Last(), "blog", "web"))
	assert.Equal(t, []string{"127.0.0.1:18081"}, BackendAddrs(tr.Last()))
	assert.Equal(t, []string{"traffic-failed", "traffic"}, ev.Seq("traffic", "traffic-failed"))
	tr.InFlightSeq("127.0.0.1:17000", 2, 0)
	st, _ := tr.Status(ctx)
	assert.Equal(t, int64(2), st.InFlight("127.0.0.1:17000"))
	st, _ = tr.Status(ctx)
	assert.Equal(t, int64(0), st.InFlight("127.0.0.1:17000"))
	assert.Equal(t, uint64(1), st.AppliedGeneration)
}

// TestHarness_SeedServing: SPEC §3 "Seeded serving app" records.
func TestHarness_SeedServing(t *testing.T) {
	h := NewEngine(t)
	h.SeedServing("blog", BlogApp(WebSpec(0)), map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {8080: 17000}})
	ctx := context.Background()
	a, ok := h.Store.Active("blog")
	require.True(t, ok)
	require.Contains(t, a.Services, "web")
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.Equal(t, "rev-0", a.Services["web"].EffectiveRevision)
	assert.Equal(t, map[int]int{8080: 17000}, a.Services["web"].BackendBinds)
	assert.Equal(t, DigestFor("registry.example/blog:1.4"), a.Services["web"].Digest)
	d, err := h.Store.LoadDesired(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "rev-0", d)
	in, err := h.Store.LoadIntent(ctx, "blog")
	require.NoError(t, err)
	assert.False(t, in.Stopped)
	assert.True(t, h.Runtime.Running("c-old"))
	assert.Equal(t, []core.Claim{{Port: 17000, Protocol: "tcp", Owner: core.ClaimOwnerBackend, App: "blog", Container: "c-old"}},
		h.Store.ClaimsOf("c-old"))
	assert.Empty(t, h.Events.List(), "seeding resets the log")
	assert.Equal(t, 0, h.Store.Saves("SaveActive"))
	assert.Equal(t, "op-1", h.Engine.NewOpID())
	assert.Equal(t, "op-2", h.Engine.NewOpID())
}

// TestEvents_IndexAndSeq covers the log helpers.
func TestEvents_IndexAndSeq(t *testing.T) {
	ev := &Events{}
	ev.Add("create", "c-new")
	ev.AddDetail("stop", "c-old", "30s")
	ev.Add("traffic", "")
	assert.Equal(t, 1, ev.Index("stop", "c-old"))
	assert.Equal(t, -1, ev.Index("stop", "c-new"))
	assert.Equal(t, 2, ev.Index("traffic", ""))
	assert.Equal(t, []string{"create", "stop", "traffic"}, ev.Kinds())
	assert.Equal(t, []string{"create c-new", "traffic"}, ev.Seq("create", "traffic"))
	ev.Reset()
	assert.Empty(t, ev.List())
}
