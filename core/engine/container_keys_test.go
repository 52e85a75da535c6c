package engine_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/depgraph"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// pgSpec is a postgres-like service: one TCP interface, image "pg:15".
func pgSpec() core.ServiceSpec {
	return core.ServiceSpec{Name: "db", Image: "pg:15", TCP: []core.L4Interface{{Port: 5432, Publish: "127.0.0.1:15432"}}}
}

// pgImage is pg:15 declaring VOLUME /var/lib/postgresql/data and
// STOPSIGNAL SIGINT.
func pgImage(healthcheck bool) core.ImageRef {
	img := coretest.ImageRefFor("pg:15")
	img.Volumes = []string{"/var/lib/postgresql/data"}
	img.StopSignal = "SIGINT"
	img.HasHealthcheck = healthcheck
	return img
}

func TestImageVolume_UnmappedVolumeIsRefusedAndNothingChanges(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Runtime.Images = map[string]core.ImageRef{"pg:15": pgImage(false)}
	spec := coretest.BlogApp(pgSpec())

	// The check the CLI runs before storing a revision.
	err := h.Engine.CheckImages(h.Ctx(), spec)
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrInvalid)
	var ive *engine.ImageVolumeError
	require.ErrorAs(t, err, &ive)
	assert.Equal(t, []string{"/var/lib/postgresql/data"}, ive.Paths)
	assert.Equal(t, "[[services.db.volume]]\nname = \"data\"\npath = \"/var/lib/postgresql/data\"\n", ive.Lines)
	assert.Contains(t, err.Error(), "declares VOLUME /var/lib/postgresql/data")

	// --dry-run refuses too.
	_, err = h.Engine.PlanDeploy(h.Ctx(), engine.DeployRequest{App: "blog", Spec: &spec})
	require.ErrorAs(t, err, &ive)

	// And the deploy's preflight, before the network or anything else.
	_, err = h.Engine.SubmitRevision(h.Ctx(), spec, "unmapped")
	require.NoError(t, err)
	h.Reset()
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.ErrorAs(t, err, &ive)
	for _, k := range []string{"ensure-network", "ensure-volume", "create", "start", "stop", "remove", "traffic"} {
		assert.Equal(t, 0, h.Events.Count(k, ""), "%s: a refusal changes nothing", k)
	}
	assert.Empty(t, h.Runtime.Created())
}

func TestImageVolume_MappedVolumeIsSequentialAndGetsTheImagesStopSignal(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Runtime.Images = map[string]core.ImageRef{"pg:15": pgImage(false)}
	db := pgSpec()
	db.Volumes = []core.VolumeMount{{Name: "pgdata", Path: "/var/lib/postgresql/data"}}
	spec := coretest.BlogApp(db)
	require.NoError(t, h.Engine.CheckImages(h.Ctx(), spec))
	_, err := h.Engine.SubmitRevision(h.Ctx(), spec, "mapped")
	require.NoError(t, err)
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	require.Len(t, h.Runtime.Created(), 1)
	cs := h.Runtime.Created()[0]
	assert.Equal(t, "SIGINT", cs.StopSignal, "R25: the image's STOPSIGNAL when none is declared")
	assert.Equal(t, engine.FlowSequential, res.Services[0].Flow)

	// A new generation is planned sequential: never overlapped.
	db.Env = map[string]string{"X": "1"}
	spec = coretest.BlogApp(db)
	plan, err := h.Engine.PlanDeploy(h.Ctx(), engine.DeployRequest{App: "blog", Spec: &spec})
	require.NoError(t, err)
	assert.Equal(t, engine.ActionSequential, plan.Services[0].Action)
}

func TestContainerKeys_ReachTheRuntimeWithDefaults(t *testing.T) {
	h := coretest.NewEngine(t)
	db := pgSpec()
	db.Entrypoint = []string{"/entry"}
	db.Command = []string{"postgres", "-c", "fsync=off"}
	db.StopSignal = "SIGQUIT"
	db.Healthcheck = &core.Healthcheck{Test: []string{"CMD", "/check"}, Interval: core.Duration(time.Second), Retries: 2}
	db.Readiness = core.Readiness{Type: core.ReadinessNone}
	db.Node = "node-2"
	db.Container = core.ContainerOptions{
		User: "999:999", WorkingDir: "/srv", Init: true, ReadOnly: true, ShmSize: 256 << 20,
		Tmpfs:   []core.TmpfsMount{{Path: "/run"}, {Path: "/tmp", Options: "size=64m"}},
		Ulimits: []core.Ulimit{{Name: "nofile", Soft: 1024, Hard: 65536}},
		CapAdd:  []string{"NET_ADMIN"}, CapDrop: []string{"ALL"},
		Sysctls: map[string]string{"net.core.somaxconn": "1024"}, ExtraHosts: []string{"metrics:10.0.0.5"},
		Labels:    map[string]string{"com.example.team": "data"},
		Resources: core.Resources{Memory: 512 << 20, CPUs: 1.5, Pids: 512},
	}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(db), "keys")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	created := h.Runtime.Created()
	require.Len(t, created, 2, "the ulimit check container (R13), then the workload")
	assert.Equal(t, "check", created[0].Labels[core.LabelRole])
	assert.Len(t, h.Runtime.Containers(), 1, "the check container is removed")
	cs := created[1]
	assert.Equal(t, []string{"/entry"}, cs.Entrypoint)
	assert.Equal(t, []string{"postgres", "-c", "fsync=off"}, cs.Cmd)
	assert.Equal(t, "SIGQUIT", cs.StopSignal)
	assert.Equal(t, "node-2", cs.Node, "the node a swarm pins the service to")
	assert.Equal(t, db.Healthcheck, cs.Healthcheck)
	assert.Equal(t, "unless-stopped", cs.RestartPolicy)
	assert.Equal(t, "data", cs.Labels["com.example.team"])
	assert.Equal(t, "blog", cs.Labels[core.LabelApp], "the runtime's own labels are kept")
	want := db.Container
	want.Labels = nil
	want.Logging = &core.Logging{Driver: "json-file", Options: map[string]string{"max-size": "10m", "max-file": "3"}}
	assert.Equal(t, want, cs.Options)
}

func TestDependsOn_DeployOrderFollowsDependencies(t *testing.T) {
	h := coretest.NewEngine(t)
	api := core.ServiceSpec{Name: "api", Image: "api:1", DependsOn: []string{"zdb"}}
	zdb := core.ServiceSpec{Name: "zdb", Image: "pg:15"}
	web := core.ServiceSpec{Name: "web", Image: "web:1", DependsOn: []string{"api"}}
	cache := core.ServiceSpec{Name: "cache", Image: "redis:7"}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(api, zdb, web, cache), "deps")
	require.NoError(t, err)
	ids := []string{"c-1", "c-2", "c-3", "c-4"}
	h.Runtime.NextIDs = append([]string(nil), ids...)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	var order []string
	byID := map[string]string{}
	for i, cs := range h.Runtime.Created() {
		order = append(order, cs.Labels[core.LabelService])
		byID[ids[i]] = cs.Labels[core.LabelService]
	}
	// cache (no deps) first by name; zdb before api before web.
	assert.Equal(t, []string{"cache", "zdb", "api", "web"}, order)

	// Stop takes dependents down first.
	h.Reset()
	_, err = h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	var stops []string
	for _, s := range h.Runtime.Stops() {
		stops = append(stops, byID[s.ID])
	}
	assert.Equal(t, []string{"web", "api", "zdb", "cache"}, stops)
}

func TestDependsOn_FailedDependencyLeavesDependentsUntouched(t *testing.T) {
	h := coretest.NewEngine(t)
	api := core.ServiceSpec{Name: "api", Image: "api:1", DependsOn: []string{"zdb"}}
	zdb := core.ServiceSpec{Name: "zdb", Image: "pg:15"}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(api, zdb), "deps-fail")
	require.NoError(t, err)
	h.Runtime.NextIDs = []string{"c-zdb"}
	h.Runtime.Fail(coretest.MStart, "c-zdb", errors.New("boom"), 1)
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.Error(t, err)
	require.Len(t, h.Runtime.Created(), 1, "api is never created")
	assert.Equal(t, "zdb", h.Runtime.Created()[0].Labels[core.LabelService])
	require.Len(t, res.Services, 1)
	assert.Equal(t, engine.ResultFailed, res.Services[0].Result)
}

func TestDockerReadiness_UnhealthyFailsAtOnceWithTheHealthLog(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Engine.HealthPollInterval = time.Millisecond
	db := pgSpec()
	db.Healthcheck = &core.Healthcheck{Test: []string{"CMD", "/check"}}
	db.Readiness.Timeout = core.Duration(time.Minute)
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(db), "unhealthy")
	require.NoError(t, err)
	h.Runtime.NextIDs = []string{"c-db"}
	run := core.ContainerState{Status: core.StatusRunning, StartedAt: coretest.T0, HasHealthcheck: true}
	starting, sick := run, run
	starting.Health = "starting"
	sick.Health, sick.HealthLog = "unhealthy", "check: connection refused"
	h.Runtime.InspectSeq("c-db", starting, starting, starting, sick)
	start := time.Now()
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "fails at once, not after the 1m budget")
	assert.True(t, engine.IsUnhealthy(err), "%v", err)
	assert.Contains(t, err.Error(), "became unhealthy; last health check: check: connection refused")
	assert.Equal(t, engine.ResultFailed, res.Services[0].Result)
	assert.False(t, h.Runtime.Exists("c-db"), "the failed candidate is removed")
}

func TestDockerReadiness_ImageHealthcheckIsWaitedForBeforeTCP(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Engine.HealthPollInterval = time.Millisecond
	h.Runtime.Images = map[string]core.ImageRef{"pg:15": pgImage(true)}
	db := pgSpec()
	db.Volumes = []core.VolumeMount{{Name: "pgdata", Path: "/var/lib/postgresql/data"}}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(db), "healthy")
	require.NoError(t, err)
	h.Runtime.NextIDs = []string{"c-db"}
	run := core.ContainerState{Status: core.StatusRunning, StartedAt: coretest.T0, HasHealthcheck: true}
	starting, ok := run, run
	starting.Health, ok.Health = "starting", "healthy"
	h.Runtime.InspectSeq("c-db", starting, starting, ok)
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, engine.ResultDeployed, res.Services[0].Result)
	assert.GreaterOrEqual(t, h.Events.Count("inspect", "c-db"), 3, "health read until healthy")
	assert.Equal(t, 0, len(h.Prober.Requests()), "no TCP probe: docker readiness comes first")
}

func TestDockerReadiness_DeclaredWithoutAnyHealthcheckIsRefused(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Runtime.Images = map[string]core.ImageRef{"pg:15": coretest.ImageRefFor("pg:15")}
	db := pgSpec()
	db.Readiness.Type = core.ReadinessDocker
	err := h.Engine.CheckImages(h.Ctx(), coretest.BlogApp(db))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "has no HEALTHCHECK")
}

func TestDependencyCycle_NamesTheCycle(t *testing.T) {
	services := []core.ServiceSpec{
		{Name: "c", DependsOn: []string{"a"}}, {Name: "a", DependsOn: []string{"b"}}, {Name: "b", DependsOn: []string{"c"}}, {Name: "d"},
	}
	assert.Equal(t, []string{"a", "b", "c", "a"}, depgraph.DependencyCycle(services))
	assert.Nil(t, depgraph.DependencyCycle([]core.ServiceSpec{{Name: "a", DependsOn: []string{"b"}}, {Name: "b"}}))
	assert.Equal(t, []string{"b", "a"}, depgraph.DependencyOrder([]core.ServiceSpec{{Name: "a", DependsOn: []string{"b"}}, {Name: "b"}}))
}

func TestDryRun_SaysWhichContainerKeyChanged(t *testing.T) {
	prev := core.ServiceSpec{Name: "db", Image: "pg:15", StopSignal: "SIGINT", Container: core.ContainerOptions{User: "postgres"}}
	next := prev
	next.StopSignal = "SIGQUIT"
	next.Container.User = "999"
	next.Container.Resources.Memory = 64 << 20
	assert.Equal(t, []string{"container.resources", "container.user", "stop_signal"}, engine.SpecChanges(&prev, &next))
	assert.Empty(t, engine.SpecChanges(&prev, &prev))

	h := coretest.NewEngine(t)
	spec := coretest.BlogApp(prev)
	_, err := h.Engine.SubmitRevision(h.Ctx(), spec, "v1")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	spec2 := coretest.BlogApp(next)
	plan, err := h.Engine.PlanDeploy(h.Ctx(), engine.DeployRequest{App: "blog", Spec: &spec2})
	require.NoError(t, err)
	assert.Equal(t, "service spec: container.resources, container.user, stop_signal", plan.Services[0].Change)
}

func TestR41_UnhealthyServingContainerIsWithdrawnRestartedAndJournaled(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-web"}, map[string]map[int]int{"web": {8080: 18081}})
	// A first pass verifies the execution.
	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	h.Reset()

	run := core.ContainerState{Status: core.StatusRunning, StartedAt: coretest.T0, HasHealthcheck: true, Health: "unhealthy", HealthLog: "db gone"}
	h.Runtime.InspectSeq("c-web", run, run)
	reps, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	require.Len(t, reps, 1)
	assert.Equal(t, []string{"web: unhealthy: db gone: withdrawn, restarted"}, reps[0].Recovered, "at the first unhealthy pass, like a dead container")
	w := h.Events.Index("withdraw", "blog/web")
	rs := h.Events.Index("restart", "c-web")
	require.GreaterOrEqual(t, w, 0, "withdrawn: %s", h.Events)
	require.GreaterOrEqual(t, rs, 0, "restarted: %s", h.Events)
	assert.Less(t, w, rs, "withdrawn before the restart")

	st, err := h.Engine.Status(h.Ctx(), "blog")
	require.NoError(t, err)
	require.NotNil(t, st.Services[0].LastRecovery)
	assert.Equal(t, "unhealthy: db gone", st.Services[0].LastRecovery.Reason)
	assert.Equal(t, "c-web", st.Services[0].LastRecovery.Container)
}

func TestR25_TheStopSignalIsRecordedPerGenerationAndInTheMarker(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Runtime.Images = map[string]core.ImageRef{"pg:15": pgImage(false)}
	db := pgSpec()
	db.Volumes = []core.VolumeMount{{Name: "pgdata", Path: "/var/lib/postgresql/data"}}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(db), "g1")
	require.NoError(t, err)
	h.Runtime.NextIDs = []string{"c-1", "c-2"}
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	active, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, "SIGINT", active.Services["db"].StopSignal, "the image's STOPSIGNAL, recorded")

	db.StopSignal = "SIGQUIT"
	_, err = h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(db), "g2")
	require.NoError(t, err)
	// The replacement fails at create: the predecessor's marker stays.
	h.Runtime.Fail(coretest.MCreate, "", errors.New("no space"), 1)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.Error(t, err)
	ms, err := h.Store.LoadMarkers(h.Ctx(), "blog")
	require.NoError(t, err)
	require.Len(t, ms, 1)
	assert.Equal(t, "c-1", ms[0].Container)
	assert.Equal(t, "SIGINT", ms[0].StopSignal, "the marker carries the old generation's signal")
	require.Len(t, h.Runtime.Stops(), 1)
	assert.Equal(t, "c-1", h.Runtime.Stops()[0].ID)
}

// R13 for validate: MissingImages names each service whose image the
// engine lacks (a deploy would pull it) and no other, and stops at a
// resolve error that is not not-found.
func TestR13_MissingImagesNamesEachServiceWhoseImageTheEngineLacks(t *testing.T) {
	h := coretest.NewEngine(t)
	web, db := coretest.WebSpec(0), coretest.WebSpec(0)
	db.Name, db.Image = "db", "registry.example/db:missing"
	spec := core.AppSpec{Name: "blog", Services: []core.ServiceSpec{web, db}}
	h.Runtime.Fail(coretest.MResolve, "registry.example/db:missing", fmt.Errorf("image: %w", core.ErrNotFound), -1)
	missing, err := h.Engine.MissingImages(h.Ctx(), spec)
	require.NoError(t, err)
	assert.Equal(t, []string{"db: registry.example/db:missing"}, missing)

	h.Runtime.Fail(coretest.MResolve, "", fmt.Errorf("engine: %w", core.ErrUnavailable), -1)
	_, err = h.Engine.MissingImages(h.Ctx(), spec)
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "service web")
}
