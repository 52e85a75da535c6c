package engine_test

import (
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
