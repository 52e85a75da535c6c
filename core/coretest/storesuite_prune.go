package coretest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// storePrune: Prune keeps the newest ops and revisions, never an
// unfinished op nor a revision DESIRED, ACTIVE or a kept op names, and
// removes nothing under its bounds.
func storePrune(t *testing.T, s core.Store) {
	ctx := suiteCtx(t)
	_, err := s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	for i := 1; i <= 8; i++ {
		require.NoError(t, s.SaveRevision(ctx, suiteRevision("blog", revID(i), suiteT0.Add(time.Duration(i)*time.Minute), "web:1")))
	}
	require.NoError(t, s.SaveDesired(ctx, "blog", "rev-2"))
	a := suiteActive("c1")
	a.Services["web"].EffectiveRevision = "rev-1"
	require.NoError(t, s.SaveActive(ctx, a))
	for i := 1; i <= 6; i++ {
		op := suiteOp("op-"+string(rune('0'+i)), "key-"+string(rune('0'+i)), suiteT0.Add(time.Duration(i)*time.Minute))
		op.Revision = revID(i + 2)
		if i != 2 {
			op.Outcome = core.OutcomeSuccess // op-2 never finished
		}
		if i == 5 {
			op.RollbackTo = "rev-3"
		}
		_, _, err := s.ClaimOp(ctx, op)
		require.NoError(t, err)
	}

	ops, revs, err := s.Prune(ctx, "blog", 10, 10)
	require.NoError(t, err)
	assert.Empty(t, append(ops, revs...), "under its bounds nothing is removed")

	ops, revs, err = s.Prune(ctx, "blog", 2, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"op-1", "op-3", "op-4"}, ops, "the unfinished op-2 is kept")
	// Kept: rev-1 (ACTIVE), rev-2 (DESIRED), rev-3 (op-5's rollback
	// target), rev-4 (op-2's), rev-7, rev-8 (op-5's, op-6's, the newest).
	assert.Equal(t, []string{"rev-5", "rev-6"}, revs)
	list, err := s.ListOps(ctx, "blog")
	require.NoError(t, err)
	assert.Len(t, list, 3)
	_, err = s.LoadRevision(ctx, "blog", "rev-5")
	require.ErrorIs(t, err, core.ErrNotFound)
	_, err = s.LoadRevision(ctx, "blog", "rev-3")
	require.NoError(t, err)
	stored, claimed, err := s.ClaimOp(ctx, suiteOp("op-9", "key-1", suiteT0.Add(time.Hour)))
	require.NoError(t, err)
	assert.True(t, claimed, "a pruned op's key claims anew: %+v", stored)
}

func revID(i int) string { return "rev-" + string(rune('0'+i)) }
