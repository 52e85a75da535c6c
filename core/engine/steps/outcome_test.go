package steps

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func TestR9_Outcome(t *testing.T) {
	r := func(results ...Result) []ServiceResult {
		var out []ServiceResult
		for i, x := range results {
			out = append(out, ServiceResult{Service: string(rune('a' + i)), Result: x})
		}
		return out
	}
	assert.Equal(t, core.OutcomePartial, Outcome(r(ResultDeployed, ResultFailed), false))
	assert.Equal(t, core.OutcomeSuccess, Outcome(r(ResultDeployed, ResultDeployed), false))
	assert.Equal(t, core.OutcomeSuccess, Outcome(r(ResultUnchanged, ResultUnchanged), false), "decision 4")
	assert.Equal(t, core.OutcomeFailed, Outcome(r(ResultFailed), false))
	assert.Equal(t, core.OutcomeFailed, Outcome(r(ResultDeployed), true), "an app-level failure step forces failed")
	assert.Equal(t, core.OutcomeFailed, Outcome(r(ResultUnchanged, ResultFailed), false), "nothing changed: the app is as it was, so failed, not partial")
	assert.Equal(t, core.OutcomePartial, Outcome(r(ResultUnchanged, ResultRemoved, ResultFailed), false), "a removal is a change")
	assert.Equal(t, core.OutcomeSuccess, Outcome(nil, false), "nothing to do is not a failure")
}

func TestR10_WarningsInServiceNameOrderThenAppLevel(t *testing.T) {
	results := []ServiceResult{
		{Service: "web", Warnings: []core.Warning{{Leftover: "c-web", Detail: "remove: busy"}}},
		{Service: "api", Warnings: []core.Warning{{Service: "api", Leftover: "c-api", Detail: "stop: x"}, {Leftover: "c-api2", Detail: "y"}}},
	}
	app := []core.Warning{{Detail: "pending retirements unknown: boom"}}
	assert.Equal(t, []core.Warning{
		{Service: "api", Leftover: "c-api", Detail: "stop: x"},
		{Service: "api", Leftover: "c-api2", Detail: "y"},
		{Service: "web", Leftover: "c-web", Detail: "remove: busy"},
		{Detail: "pending retirements unknown: boom"},
	}, Warnings(results, app))
}

// TestR6_NewOpIDIsTimeOrderedHex: "op-" + 32 hex digits, unique, sorted
// in generation order; container names take the id's random tail.
func TestR6_NewOpIDIsTimeOrderedHex(t *testing.T) {
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = NewOpID()
		require.Regexp(t, `^op-[0-9a-f]{32}$`, ids[i])
	}
	assert.True(t, slices.IsSorted(ids), "ids sort in generation order")
	assert.Len(t, slices.Compact(slices.Clone(ids)), len(ids), "ids are unique")
	assert.Equal(t, "gordon-blog-web-b4c5d6e7", ContainerName("blog", "web", "op-0190f3a2b4c5d6e7"), "the random tail, not the clock prefix")
	assert.Equal(t, "gordon-blog-web-7", ContainerName("blog", "web", "op-7"))
}

func TestR6_FingerprintSeparatesParts(t *testing.T) {
	assert.Equal(t, Fingerprint(core.OpDeploy, "blog", "rev-1"), Fingerprint(core.OpDeploy, "blog", "rev-1"))
	assert.NotEqual(t, Fingerprint(core.OpDeploy, "blog", "rev-1"), Fingerprint(core.OpDeploy, "blog", "rev-2"))
	assert.NotEqual(t, Fingerprint(core.OpDeploy, "blog", "a,b"), Fingerprint(core.OpDeploy, "blog,a", "b"))
}

// r7Store is a Store whose latest op is fixed and whose ClaimOp records
// calls; every other method is unused (nil embedded interface).
type r7Store struct {
	core.Store
	latest  core.Operation
	stored  *core.Operation
	claimed int
}

func (s *r7Store) LatestOp(ctx context.Context, app string) (core.Operation, error) {
	return s.latest, nil
}

func (s *r7Store) ClaimOp(ctx context.Context, op core.Operation) (core.Operation, bool, error) {
	s.claimed++
	if s.stored != nil && s.stored.Key == op.Key {
		return *s.stored, false, nil
	}
	return op, true, nil
}

func TestR7_NoClaimOverAnUnfinishedOp(t *testing.T) {
	st := &r7Store{latest: core.Operation{ID: "op-1", Kind: core.OpStop, App: "blog"}}
	e := &Engine{Store: st}
	_, claimed, err := e.ClaimOp(context.Background(), core.Operation{ID: "op-2", Kind: core.OpDeploy, App: "blog"})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "op-1")
	assert.False(t, claimed)
	assert.Equal(t, 0, st.claimed, "nothing persisted")

	// A terminal latest op does not block.
	st.latest.Outcome = core.OutcomeFailed
	op, claimed, err := e.ClaimOp(context.Background(), core.Operation{Kind: core.OpDeploy, App: "blog"})
	require.NoError(t, err)
	assert.True(t, claimed)
	assert.Regexp(t, `^op-[0-9a-f]{32}$`, op.ID)
}

func TestR8_ReplayOfUnfinishedOpSaysNotTerminal(t *testing.T) {
	stored := core.Operation{ID: "op-1", Kind: core.OpDeploy, App: "blog", Key: "k", Fingerprint: "f"}
	st := &r7Store{latest: stored, stored: &stored}
	e := &Engine{Store: st}
	got, claimed, err := e.ClaimOp(context.Background(), core.Operation{ID: "op-2", Kind: core.OpDeploy, App: "blog", Key: "k", Fingerprint: "f"})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "has not reached a terminal outcome")
	assert.False(t, claimed)
	assert.Equal(t, "op-1", got.ID)
}

// A lock held from another host name (the gordon-reconcile container, a
// runner) is named by that host, not by its pid, which means nothing here.
func TestLockWaitText_HolderInAnotherContainerIsNamedByItsHost(t *testing.T) {
	local, _ := os.Hostname()
	msg := LockWaitText("shop", "secrets", core.LockHolder{PID: 1, Verb: "reconcile", Host: "3f2a9b0c1d2e"}, nil, time.Minute)
	assert.Contains(t, msg, "held by a reconcile running in container or host 3f2a9b0c1d2e")
	assert.NotContains(t, msg, "pid 1")
	assert.Contains(t, msg, "waiting up to 1m0s")
	msg = LockWaitText("shop", "deploy", core.LockHolder{PID: 4242, Verb: "deploy", Host: local}, nil, time.Minute)
	assert.Contains(t, msg, "held by pid 4242 (deploy")
}
