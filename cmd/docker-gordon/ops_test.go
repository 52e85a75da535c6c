package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func TestOps_OperationIDPrefixResolvesToTheOneMatch(t *testing.T) {
	ops := []core.Operation{{ID: "op-019ad1c2a1b27e51"}, {ID: "op-019ad1c2a1b2d0f3"}, {ID: "op-0198ffee01aa4c10"}}
	id, err := matchOpID("web", ops, "0198")
	require.NoError(t, err)
	assert.Equal(t, "op-0198ffee01aa4c10", id)
	id, err = matchOpID("web", ops, "op-019ad1c2a1b2d")
	require.NoError(t, err)
	assert.Equal(t, "op-019ad1c2a1b2d0f3", id)

	_, err = matchOpID("web", ops, "op-019ad1c2")
	assert.ErrorIs(t, err, core.ErrInvalid, "two matches are ambiguous")
	assert.Contains(t, err.Error(), "op-019ad1c2a1b27e51, op-019ad1c2a1b2d0f3")
	_, err = matchOpID("web", ops, "01997")
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "docker gordon ops web")
}

// ops names a rollback a rollback, with the revision it returns to.
func TestOps_RollbackShownAsRollbackOfItsTarget(t *testing.T) {
	op := core.Operation{Kind: core.OpDeploy, Verb: core.VerbRollback, Revision: "rev-5", RollbackTo: "rev-2"}
	assert.Equal(t, "rollback", op.VerbOrKind())
	assert.Equal(t, "rev-5 (= rev-2)", opRevision(op))
	plain := core.Operation{Kind: core.OpDeploy, Revision: "rev-4"}
	assert.Equal(t, "deploy", plain.VerbOrKind())
	assert.Equal(t, "rev-4", opRevision(plain))
}
