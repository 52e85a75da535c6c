package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// R59: with a runtime that can set a restart policy later, a candidate is
// created without one and gets the workload policy once it is ready,
// before ACTIVE names it, so the engine never restarts a candidate that
// exits while it is probed and every serving generation has the policy.
func TestR59_CandidateGetsItsRestartPolicyOnceReadyBeforePublication(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	pr := coretest.PolicyRuntime{Runtime: h.Runtime}
	h.Engine.Runtime = pr
	h.Runtime.NextIDs = []string{"c-new"}
	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	created := h.Runtime.Created()
	require.Len(t, created, 1)
	assert.Equal(t, "", created[0].RestartPolicy, "created without a restart policy")
	assert.Equal(t, engine.WorkloadRestartPolicy, pr.RestartPolicy("c-new"))
	set := h.Events.Index(coretest.MSetRestartPolicy, "c-new")
	require.GreaterOrEqual(t, set, 0)
	assert.Greater(t, set, h.Events.Index("ready", "c-new"), "granted once ready")
	assert.Less(t, set, h.Events.Index("publish-active", "blog"), "granted before ACTIVE names it")
}

// R59: a candidate that exits while it is probed is not given a restart
// policy: it stays exited, fails at once with its exit code and is removed.
func TestR59_CandidateThatExitsWhileProbedNeverGetsARestartPolicy(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Engine.Runtime = coretest.PolicyRuntime{Runtime: h.Runtime}
	h.Runtime.NextIDs = []string{"c-new"}
	h.Engine.Readiness.HTTPInterval = 5 * time.Millisecond
	h.Engine.CandidateWatch = 5 * time.Millisecond
	h.Prober.CheckFn = func(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
		h.Runtime.SetExit("c-new", 3, false)
		return core.ProbeResult{Detail: "connection refused"}, nil
	}
	next := depNewWeb(0)
	next.Readiness.Timeout = core.Duration(time.Minute)
	_, err := depDeploy(t, h, engine.DeployRequest{}, next)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited with code 3")
	assert.Equal(t, 0, h.Events.Count(coretest.MSetRestartPolicy, "c-new"))
	assert.False(t, h.Runtime.Exists("c-new"))
	assert.True(t, h.Runtime.Running("c-old"))
}

// R59 with a runtime that cannot set a policy later (the candidate carries
// it from creation): a candidate the engine is restarting counts as the
// exit it is, naming the exit code, instead of being probed until the
// readiness timeout.
func TestR59_RestartingCandidateCountsAsItsExit(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Engine.Readiness.HTTPInterval = 5 * time.Millisecond
	h.Engine.CandidateWatch = 5 * time.Millisecond
	h.Prober.CheckFn = func(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
		h.Runtime.InspectSeq("c-new", core.ContainerState{ID: "c-new", Status: core.StatusRestarting, ExitCode: 3})
		return core.ProbeResult{Detail: "connection refused"}, nil
	}
	next := depNewWeb(0)
	next.Readiness.Timeout = core.Duration(time.Minute)
	_, err := depDeploy(t, h, engine.DeployRequest{}, next)
	require.Error(t, err)
	var ce *engine.CandidateExitError
	require.True(t, errors.As(err, &ce), "want a candidate exit, got %v", err)
	assert.Equal(t, 3, ce.ExitCode)
	assert.Equal(t, engine.WorkloadRestartPolicy, h.Runtime.Created()[0].RestartPolicy, "no setter: the policy comes with the creation")
}

// R59 crash recovery: a serving container that reports no restart policy
// (a command died between creating and granting it) gets the workload
// policy from the reconcile pass that verifies it.
func TestR59_ReconcileGivesAServingContainerWithoutPolicyItsPolicy(t *testing.T) {
	h := coretest.NewEngine(t)
	pr := coretest.PolicyRuntime{Runtime: h.Runtime}
	h.Engine.Runtime = pr
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {8080: 17000}})
	require.NoError(t, pr.SetRestartPolicy(h.Ctx(), "c-old", "no"))
	_, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.Equal(t, engine.WorkloadRestartPolicy, pr.RestartPolicy("c-old"))
}
