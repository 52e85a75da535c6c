package retention

import (
	"fmt"
	"testing"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestSelect_JobRunsAreBoundedPerJobApartFromTheOtherOps: a frequent job
// keeps its newest JobRuns finished runs and does not push the deploys
// out of keepOps; an unfinished run is never removed.
func TestSelect_JobRunsAreBoundedPerJobApartFromTheOtherOps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ops []core.Operation
	at := 0
	add := func(id, kind, step string, outcome core.Outcome) {
		ops = append(ops, core.Operation{ID: id, Kind: kind, App: "blog", StartedAt: t0.Add(time.Duration(at) * time.Second), Outcome: outcome,
			Steps: []core.Step{{ID: step}}})
		at++
	}
	for i := range 3 {
		add(fmt.Sprintf("op-d%d", i), core.OpDeploy, "preflight", core.OutcomeSuccess)
	}
	add("op-running", "job", "job.cleanup", "")
	for i := range JobRuns + 5 {
		add(fmt.Sprintf("op-j%02d", i), "job", "job.cleanup", core.OutcomeSuccess)
		add(fmt.Sprintf("op-r%02d", i), "job", "job.report", core.OutcomeFailed)
	}
	removed, _ := Select(ops, nil, "op-d2", "", core.Active{}, 3, 0)
	want := map[string]bool{}
	for i := range 5 {
		want[fmt.Sprintf("op-j%02d", i)], want[fmt.Sprintf("op-r%02d", i)] = true, true
	}
	if len(removed) != len(want) {
		t.Fatalf("removed %v, want the 5 oldest runs of each job", removed)
	}
	for _, id := range removed {
		if !want[id] {
			t.Errorf("removed %s, which retention keeps", id)
		}
	}
}
