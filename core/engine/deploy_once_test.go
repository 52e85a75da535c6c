package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func onceSpec() core.ServiceSpec {
	return core.ServiceSpec{Name: "migrate", Image: "registry.example/blog:1.4", Command: []string{"migrate"}, Run: core.RunOnce}
}

// A one-shot (compose service_completed_successfully) runs to completion
// before the service that depends on it: created without a restart
// policy, journaled before start, waited for until it exits 0, removed;
// never published in ACTIVE; the dependent is deployed after it.
func TestRunOnce_CompletesBeforeDependent(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Runtime.NextIDs = []string{"c-job", "c-web"}
	web := coretest.WebSpec(0)
	web.DependsOn = []string{"migrate"}
	h.Runtime.InspectSeq("c-job",
		core.ContainerState{Status: core.StatusRunning},
		core.ContainerState{Status: core.StatusRunning},
		core.ContainerState{Status: core.StatusExited, ExitCode: 0})

	res, err := depDeploy(t, h, engine.DeployRequest{}, web, onceSpec())
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	require.Len(t, res.Services, 2)
	assert.Equal(t, "migrate", res.Services[0].Service, "the one-shot runs first")
	assert.Equal(t, engine.FlowRunOnce, res.Services[0].Flow)
	assert.Equal(t, engine.ResultDeployed, res.Services[1].Result)

	created := h.Runtime.Created()
	require.Len(t, created, 2)
	assert.Equal(t, "", created[0].RestartPolicy, "a one-shot is never restarted by Docker")
	assert.Equal(t, engine.WorkloadRestartPolicy, created[1].RestartPolicy)
	assert.Less(t, h.Events.LastIndex("remove", "c-job"), h.Events.Index("create", ""+"c-web"), "the one-shot is gone before the dependent is created")
	assert.Equal(t, 0, h.Events.Count("ready", "c-job")+h.Events.Count("probe-failed", "c-job"), "no readiness for a one-shot")
	assert.Equal(t, 1, h.Events.Count("ready", "c-web"))

	active, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	_, published := active.Services["migrate"]
	assert.False(t, published, "a one-shot is never in ACTIVE")
	assert.True(t, active.Converged, "and does not keep the app from converging")
	st := depLastOp(t, h).Step("service.migrate.replace")
	assert.Equal(t, core.StepSucceeded, st.State)
	assert.Equal(t, "c-job", st.After)
	assert.Contains(t, st.Detail, "ran to completion: exit 0")
}

// A one-shot that exits non-zero fails the deploy before its dependent:
// the dependent is untouched, the one-shot removed, its log tail kept.
func TestRunOnce_FailureStopsDependents(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Runtime.NextIDs = []string{"c-job"}
	h.Runtime.LogsFor("c-job", "migration 42 failed: relation exists")
	h.Runtime.InspectSeq("c-job", core.ContainerState{Status: core.StatusExited, ExitCode: 3})
	web := coretest.WebSpec(0)
	web.DependsOn = []string{"migrate"}

	res, err := depDeploy(t, h, engine.DeployRequest{}, web, onceSpec())
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "exited with status 3")
	assert.Equal(t, core.OutcomeFailed, res.Outcome)
	require.Len(t, res.Services, 1, "web is never attempted")
	assert.Equal(t, []string{"migration 42 failed: relation exists"}, res.Services[0].Diagnostics)
	assert.Len(t, h.Runtime.Created(), 1)
	assert.Equal(t, 1, h.Events.Count("remove", "c-job"))
}

// The plan names the one-shot's flow.
func TestRunOnce_Plan(t *testing.T) {
	p := engine.BuildPlan(planRev(onceSpec()), core.Active{}, nil, nil, nil, map[string]core.ImageRef{})
	assert.Equal(t, engine.ActionRunOnce, p.Service("migrate").Action)
	assert.Contains(t, p.String(), "migrate: run-once (one-shot: runs to completion before the services that depend on it)")
}
