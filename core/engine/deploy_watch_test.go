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

// A candidate that exits while it is probed fails the step at once, naming
// its exit code (and the OOM kill), with its log tail as diagnostics; it is
// not probed until the readiness budget runs out (SPEC R17.6).
func TestR17_CandidateExitingDuringReadinessFailsAtOnce(t *testing.T) {
	for _, oom := range []bool{false, true} {
		h := depSeedWeb(t, coretest.WebSpec(0))
		h.Runtime.NextIDs = []string{"c-new"}
		h.Runtime.LogsFor("c-new", "fatal: config file missing")
		h.Engine.Readiness.HTTPInterval = 5 * time.Millisecond
		h.Engine.CandidateWatch = 5 * time.Millisecond
		probes := 0
		h.Prober.CheckFn = func(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
			probes++
			if probes == 1 {
				h.Runtime.SetExit("c-new", 3, oom)
			}
			return core.ProbeResult{Detail: "dial tcp: connection refused"}, nil
		}
		next := depNewWeb(0)
		next.Readiness.Timeout = core.Duration(time.Minute) // longer than the test context
		res, err := depDeploy(t, h, engine.DeployRequest{}, next)
		require.Error(t, err)
		var ce *engine.CandidateExitError
		require.True(t, errors.As(err, &ce), "want a candidate exit, got %v", err)
		assert.ErrorIs(t, err, core.ErrNotReady)
		assert.NotErrorIs(t, err, core.ErrConflict)
		assert.Contains(t, err.Error(), "exited with code 3")
		assert.NotContains(t, err.Error(), "readiness timeout")
		assert.Equal(t, oom, ce.OOMKilled)
		if oom {
			assert.Contains(t, err.Error(), "out of memory")
		}
		require.Len(t, res.Services, 1)
		assert.Equal(t, []string{"fatal: config file missing"}, res.Services[0].Diagnostics)
		assert.True(t, h.Runtime.Running("c-old"), "the serving generation keeps serving")
		assert.False(t, h.Runtime.Exists("c-new"), "the dead candidate is removed")
	}
}

// A candidate already dead when its binds are read fails with its exit
// code and log tail, not with "no 127.0.0.1 binding".
func TestR17_CandidateDeadAtBindReadingNamesItsExit(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.LogsFor("c-new", "panic: listen :8080: permission denied")
	h.Runtime.InspectSeq("c-new", core.ContainerState{Status: core.StatusExited, ExitCode: 2})
	res, err := depDeploy(t, h, engine.DeployRequest{}, depNewWeb(0))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrNotReady)
	assert.Contains(t, err.Error(), "exited with code 2")
	require.Len(t, res.Services, 1)
	assert.Equal(t, []string{"panic: listen :8080: permission denied"}, res.Services[0].Diagnostics)
	assert.Equal(t, 0, h.Runtime.Calls(coretest.MBinds), "binds of a dead candidate are not read")
	assert.Zero(t, h.Prober.Requests(), "a dead candidate is not probed")
}
