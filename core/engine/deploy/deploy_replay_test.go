package deploy

import (
	"encoding/json"
	"testing"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestR8_ReplayResultReadsStoredResult: a replay reports the result each
// succeeded step stored, and a journal written before Step.Result existed
// still replays with the result derived from the step's id and detail.
func TestR8_ReplayResultReadsStoredResult(t *testing.T) {
	stored := core.Operation{ID: "op-1", Outcome: core.OutcomeSuccess, Steps: []core.Step{
		{ID: steps.StepPreflight, State: core.StepSucceeded},
		{ID: steps.ServiceStepID("web", "replace"), Service: "web", State: core.StepSucceeded, Result: string(steps.ResultUnchanged)},
		{ID: steps.ServiceStepID("api", "replace"), Service: "api", State: core.StepSucceeded, Result: string(steps.ResultDeployed), Detail: "unchanged-looking note"},
		{ID: steps.ServiceStepID("old", "remove"), Service: "old", State: core.StepSucceeded, Result: string(steps.ResultRemoved)},
	}}
	old := core.Operation{ID: "op-2", Outcome: core.OutcomeFailed, Steps: []core.Step{
		{ID: steps.ServiceStepID("web", "replace"), Service: "web", State: core.StepSucceeded, Detail: "unchanged: already running c-1"},
		{ID: steps.ServiceStepID("api", "replace"), Service: "api", State: core.StepSucceeded},
		{ID: steps.ServiceStepID("old", "remove"), Service: "old", State: core.StepSucceeded},
		{ID: steps.ServiceStepID("db", "replace"), Service: "db", State: core.StepFailed, Error: "boom"},
		{ID: steps.ServiceStepID("q", "replace"), Service: "q", State: core.StepPending},
	}}
	type got struct {
		Service string
		Result  string
		Flow    string
	}
	project := func(op core.Operation) []got {
		var out []got
		for _, s := range replayResult(op).Services {
			out = append(out, got{s.Service, string(s.Result), string(s.Flow)})
		}
		return out
	}
	assert.Equal(t, []got{
		{"web", "unchanged", "unchanged"}, {"api", "deployed", ""}, {"old", "removed", ""},
	}, project(stored))
	assert.Equal(t, []got{
		{"web", "unchanged", "unchanged"}, {"api", "deployed", ""}, {"old", "removed", ""}, {"db", "failed", ""}, {"q", "", ""},
	}, project(old))
	assert.True(t, replayResult(old).Replayed)
}

// TestR9_TypedVocabulariesMarshalAsTheirText: the named string types of
// results, flows, actions, outcomes and step states keep the wire text
// (--format json, journal records) of the strings they replaced.
func TestR9_TypedVocabulariesMarshalAsTheirText(t *testing.T) {
	b, err := json.Marshal(steps.ServiceResult{Service: "web", Result: steps.ResultDeployed, Flow: steps.FlowOverlap})
	require.NoError(t, err)
	assert.Equal(t, `{"service":"web","result":"deployed","flow":"overlap","started_at":"0001-01-01T00:00:00Z"}`, string(b))
	b, err = json.Marshal(PlannedService{Service: "web", Action: ActionSequential})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"action":"sequential"`)
	b, err = json.Marshal(core.Operation{ID: "op-1", Outcome: core.OutcomePartial, Steps: []core.Step{{ID: "preflight", State: core.StepSucceeded}}})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"outcome":"partial"`)
	assert.Contains(t, string(b), `"state":"succeeded"`)
	var back core.Operation
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, core.OutcomePartial, back.Outcome)
	assert.Equal(t, core.StepSucceeded, back.Steps[0].State)
}
