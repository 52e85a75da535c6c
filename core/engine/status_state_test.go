package engine_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// status shows each container's real state and the app as degraded when a
// serving container is not running (exited, restarting, gone).
func TestStatus_ShowsRealContainerStateAndDegraded(t *testing.T) {
	for _, tc := range []struct {
		name, state string
		apply       func(h *coretest.Harness)
	}{
		{"running", core.StatusRunning, func(h *coretest.Harness) {}},
		{"exited", core.StatusExited, func(h *coretest.Harness) { h.Runtime.SetExit("c-1", 3, false) }},
		{"restarting", core.StatusRestarting, func(h *coretest.Harness) { h.Runtime.SetState("c-1", core.StatusRestarting, coretest.T0) }},
		{"gone", "missing", func(h *coretest.Harness) { h.Runtime.Delete("c-1") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := lcSeed(t, "c-1", 17000, 0)
			tc.apply(h)
			st, err := h.Engine.Status(h.Ctx(), "blog")
			require.NoError(t, err)
			require.Len(t, st.Services, 1)
			assert.Equal(t, tc.state, st.Services[0].State)
			if tc.state == core.StatusRunning {
				assert.Equal(t, engine.AppStateRunning, st.State)
				assert.Empty(t, st.Problems)
				return
			}
			assert.Equal(t, engine.AppStateDegraded, st.State)
			require.Len(t, st.Problems, 1)
			assert.Contains(t, st.Problems[0], tc.state)
		})
	}
}

// A failed first deploy leaves nothing serving: status says not-deployed,
// never running.
func TestStatus_FailedFirstDeployIsNotRunning(t *testing.T) {
	h := coretest.NewEngine(t)
	rev, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), "sha", "")
	require.NoError(t, err)
	h.Prober.SetResult("c-1", false, "503")
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.Error(t, err)
	st, err := h.Engine.Status(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, engine.AppStateNotDeployed, st.State)
}

// After stop (R50 retires the containers, ACTIVE keeps their IDs), each
// service reads stopped, not missing, and the app stopped.
func TestStatus_StoppedAppServicesReadStopped(t *testing.T) {
	h := lcSeed(t, "c-1", 17000, 0)
	_, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	st, err := h.Engine.Status(h.Ctx(), "blog")
	require.NoError(t, err)
	require.Len(t, st.Services, 1)
	assert.Equal(t, engine.AppStateStopped, st.Services[0].State)
	assert.Equal(t, engine.AppStateStopped, st.State)
	assert.Empty(t, st.Problems)
}

// TestStatus_NeverClaimsAnOperationThatDidNotRun: the state disk fills up
// between storing revision rev-1 (DESIRED) and claiming its deploy: the
// deploy fails, no op is journaled, rev-0 keeps serving, and status says
// rev-1 was never deployed and that the last op was rev-0's deploy, never
// that rev-1's deploy succeeded. Once an op claims rev-1, the flag goes.
func TestStatus_NeverClaimsAnOperationThatDidNotRun(t *testing.T) {
	h := seedWeb(t, 0)
	h.SeedOp(core.Operation{ID: "op-seed", Kind: core.OpDeploy, App: "blog", Revision: "rev-0", StartedAt: coretest.T0,
		FinishedAt: coretest.T0, Outcome: core.OutcomeSuccess,
		Steps: []core.Step{{ID: engine.StepPreflight, State: core.StepSucceeded}}})
	spec := coretest.BlogApp(coretest.WebSpec(0))
	spec.Name = "blog"
	spec.Env = map[string]string{"NEW": "1"}
	rev, err := h.Engine.SubmitRevision(h.Ctx(), spec, "sha-new")
	require.NoError(t, err)
	h.Store.FailNext("ClaimOp", &os.PathError{Op: "write", Path: "ops", Err: syscall.ENOSPC})
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ENOSPC)

	st, err := h.Engine.Status(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, rev.ID, st.Desired)
	assert.True(t, st.DesiredUnclaimed, "the desired revision was never deployed")
	require.NotNil(t, st.LastOp)
	assert.Equal(t, "op-seed", st.LastOp.ID)
	assert.Equal(t, "rev-0", st.LastOp.Revision, "the last op is shown with the revision it deployed")
	assert.Equal(t, "rev-0", st.Services[0].Revision)

	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	st, err = h.Engine.Status(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.False(t, st.DesiredUnclaimed)
	assert.Equal(t, rev.ID, st.LastOp.Revision)
}
