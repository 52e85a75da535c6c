package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// exec reaches every instance of a replicated service, numbered as status
// lists them (the primary first), and names the count; an instance the
// service does not run is refused naming the range.
func TestReplicas_ExecReachesEveryInstance(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-2", "c-3")
	for i, want := range []string{"c-old", "c-2", "c-3"} {
		id, n, err := h.Engine.ServingContainer(h.Ctx(), "blog", "web", i+1)
		require.NoError(t, err)
		assert.Equal(t, want, id)
		assert.Equal(t, 3, n)
	}
	_, _, err := h.Engine.ServingContainer(h.Ctx(), "blog", "web", 4)
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "pick one from 1 to 3")
}

// logs delivers every instance's lines, each tagged with its instance
// (1-based) when the service runs several; Instance narrows it to one.
func TestReplicas_LogsMergeEveryInstanceAndInstanceNarrows(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-2", "c-3")
	h.Runtime.LogsFor("c-old", "one")
	h.Runtime.LogsFor("c-2", "two")
	h.Runtime.LogsFor("c-3", "three")
	collect := func(opts core.LogOptions) ([]string, error) {
		var got []string
		err := h.Engine.Logs(h.Ctx(), "blog", "web", opts, func(s string, l core.LogLine) error {
			got = append(got, s+"-"+string(rune('0'+l.Instance))+" "+l.Text)
			return nil
		})
		return got, err
	}
	got, err := collect(core.LogOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"web-1 one", "web-2 two", "web-3 three"}, got)
	got, err = collect(core.LogOptions{Follow: true})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"web-1 one", "web-2 two", "web-3 three"}, got)
	got, err = collect(core.LogOptions{Instance: 2})
	require.NoError(t, err)
	assert.Equal(t, []string{"web-2 two"}, got)
	_, err = collect(core.LogOptions{Instance: 4})
	assert.ErrorIs(t, err, core.ErrNotFound)
}

// A single-instance service's lines carry no instance number.
func TestReplicas_LogsOfOneInstanceCarryNoNumber(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	h.Runtime.LogsFor("c-old", "hello")
	var inst []int
	require.NoError(t, h.Engine.Logs(h.Ctx(), "blog", "", core.LogOptions{}, func(_ string, l core.LogLine) error {
		inst = append(inst, l.Instance)
		return nil
	}))
	assert.Equal(t, []int{0}, inst)
}

// stop then start brings a replicated service back to its declared count,
// every instance routed.
func TestReplicas_StartRestoresTheDeclaredCount(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	lcDeployV15(t, h)
	h.Runtime.NextIDs = []string{"c-s2", "c-s3"}
	_, err := h.Engine.Scale(h.Ctx(), engine.ScaleRequest{App: "blog", Replicas: map[string]int{"web": 3}})
	require.NoError(t, err)
	require.Len(t, repInstances(t, h), 3)

	_, err = h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	require.Len(t, repInstances(t, h), 1)
	h.Reset()
	h.Runtime.NextIDs = []string{"c-r2", "c-r3"}
	res, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Empty(t, res.Warnings)
	ins := repInstances(t, h)
	require.Len(t, ins, 3, "start restores the declared count")
	assert.ElementsMatch(t, repIDs(ins), repRouted(t, h), "every instance is routed")
}

// start after stop with the recorded container gone rebuilds the service
// (R54) with every declared instance recorded: 3 instances, every one
// routed, no instance left running that ACTIVE does not name.
func TestReplicas_StartRebuildRecordsEveryInstance(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	lcDeployV15(t, h)
	h.Runtime.NextIDs = []string{"c-s2", "c-s3"}
	_, err := h.Engine.Scale(h.Ctx(), engine.ScaleRequest{App: "blog", Replicas: map[string]int{"web": 3}})
	require.NoError(t, err)
	_, err = h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	primary := repInstances(t, h)[0].Container
	h.Runtime.Delete(primary)
	h.Reset()
	h.Runtime.NextIDs = []string{"c-r1", "c-r2", "c-r3", "c-x1", "c-x2", "c-x3"}
	res, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	ins := repInstances(t, h)
	require.Len(t, ins, 3, "the rebuild records every instance it started")
	assert.Equal(t, []string{"c-r1", "c-r2", "c-r3"}, repIDs(ins), "no second round of instances")
	assert.ElementsMatch(t, repIDs(ins), repRouted(t, h))
	for _, id := range []string{"c-x1", "c-x2", "c-x3"} {
		assert.False(t, h.Runtime.Exists(id))
	}
}

// status counts the instances that serve against the declared count: all
// three serve → running, 3 of 3; one exited → degraded, 2 of 3, naming the
// instance; fewer recorded than declared → degraded, naming the remedy.
func TestReplicas_StatusShowsServingOfDeclared(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-2", "c-3")
	a, _ := h.Store.Active("blog")
	a.Services["web"].Spec.Replicas = 3
	require.NoError(t, h.Store.SaveActive(h.Ctx(), a))
	for _, id := range []string{"c-2", "c-3"} {
		h.Runtime.AddContainer(id, core.ContainerState{Status: core.StatusRunning}, map[int]int{8080: 17001})
	}
	st, err := h.Engine.Status(h.Ctx(), "blog")
	require.NoError(t, err)
	require.Len(t, st.Services, 1)
	assert.Equal(t, 3, st.Services[0].Declared)
	assert.Equal(t, 3, st.Services[0].Serving)
	assert.Equal(t, engine.AppStateRunning, st.State)

	h.Runtime.AddContainer("c-3", core.ContainerState{Status: "exited"}, map[int]int{8080: 17002})
	st, err = h.Engine.Status(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, 2, st.Services[0].Serving)
	assert.Equal(t, engine.AppStateDegraded, st.State)
	assert.Contains(t, st.Problems, "service web: instance c-3 is exited")

	a.Services["web"].Replicas = a.Services["web"].Replicas[:1]
	require.NoError(t, h.Store.SaveActive(h.Ctx(), a))
	st, err = h.Engine.Status(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, 2, st.Services[0].Serving)
	assert.Equal(t, engine.AppStateDegraded, st.State)
	require.NotEmpty(t, st.Problems)
	assert.Contains(t, st.Problems[len(st.Problems)-1], "2 of 3 instances serve")
	assert.Contains(t, st.Problems[len(st.Problems)-1], "docker gordon scale blog web=3")
}

// Each instance of a replicated service has its own hostname
// (<service>-<n>), while the service name stays every instance's network
// alias; a service of one instance keeps its name as hostname.
func TestReplicas_EachInstanceHasItsOwnHostnameAndTheServiceAlias(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-a", "c-b", "c-c"}
	_, err := depDeploy(t, h, engine.DeployRequest{}, repWeb(3))
	require.NoError(t, err)
	var hosts []string
	for _, cs := range h.Runtime.Created() {
		hosts = append(hosts, cs.Hostname)
		assert.Equal(t, []string{"web"}, cs.Aliases, cs.Name)
	}
	assert.ElementsMatch(t, []string{"web-1", "web-2", "web-3"}, hosts)
}
