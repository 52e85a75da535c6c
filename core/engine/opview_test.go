package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Machine output of an op: list and detail carry the same "verb" (a
// scale's verb, not its kind), and phases are integer milliseconds under
// phases_ms, as the webhook sends them.
func TestOpView_VerbAndPhasesInMilliseconds(t *testing.T) {
	op := core.Operation{ID: "op1", Kind: core.OpDeploy, Verb: "scale", App: "shop",
		Steps: []core.Step{{ID: "web", Phases: map[string]core.Duration{"probe": core.Duration(1500 * time.Millisecond), "lock": core.Duration(749 * time.Microsecond)}}}}
	data, err := json.Marshal(OpViews([]core.Operation{op}))
	require.NoError(t, err)
	var got []map[string]any
	require.NoError(t, json.Unmarshal(data, &got))
	require.Len(t, got, 1)
	assert.Equal(t, "scale", got[0]["verb"])
	step := got[0]["steps"].([]any)[0].(map[string]any)
	assert.NotContains(t, step, "phases", "duration strings are not machine output")
	assert.Equal(t, map[string]any{"probe": 1500.0, "lock": 0.0}, step["phases_ms"])

	plain := OpViewOf(core.Operation{ID: "op2", Kind: core.OpDeploy})
	assert.Equal(t, "deploy", plain.Verb, "an op without a verb shows its kind")
	data, err = json.Marshal(plain)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"steps":[]`)
}
