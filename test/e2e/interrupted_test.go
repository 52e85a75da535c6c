package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// TestR47_KillAfterSequentialCreateIsRolledBackByReconcile: a sequential
// replacement of a volume service killed (kill -9) right after the runtime
// created its candidate and before the journal recorded it, the old
// container already removed. One reconcile removes the `created` candidate
// (found by its op label), rebuilds the old generation from its pinned
// revision and routes it: exit 0, one running generation, the data kept,
// and the journal says the candidate was created but not journaled.
func TestR47_KillAfterSequentialCreateIsRolledBackByReconcile(t *testing.T) {
	k1 := testimages.Require(t, "v1", "kv")["kv"]
	k2 := testimages.Require(t, "v2", "kv")["kv"]
	a := fixture.NewApp(t, "e2eseqkill")
	host := "seqkill.test"
	a.MustDeploy(kvManifest(a.Name, k1, host))
	before := checkConverged(t, a.State, a.Name, "kv", a.Edge, host, "/version", kvIdent)
	require.NoError(t, a.Edge.Put(host, "/k/greeting", "hello"))

	a.Write(kvManifest(a.Name, k2, host))
	r := fixture.RunCLI(t, fixture.FaultBin(), a.State, []string{"GORDON_FAULT=CreateContainer#1"}, "deploy", "-f", a.File)
	require.True(t, r.Killed, "killed right after the candidate was created: %s", r.String())
	left := fixture.Managed(t, a.Name, "kv")
	require.Len(t, left, 1, "the old container is gone and the candidate exists")
	require.NotEqual(t, before.Container, left[0])
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Status}}", left[0]).Output()
	require.NoError(t, err)
	require.Equal(t, "created", strings.TrimSpace(string(out)), "the kill came before the candidate was started")

	rec := fixture.RunCLI(t, fixture.NormalBin(), a.State, nil, "reconcile", a.Name)
	require.Equal(t, 0, rec.Code, "reconcile rolls the replacement back: %s", rec.String())
	after := checkConverged(t, a.State, a.Name, "kv", a.Edge, host, "/version", kvIdent)
	assert.Equal(t, before.Image, after.Image, "rolled back to the pinned revision's image")
	assert.NotContains(t, fixture.Managed(t, a.Name, ""), left[0], "the unjournaled candidate is removed")
	code, body, err := a.Edge.Get(host, "/k/greeting")
	require.NoError(t, err)
	assert.Equal(t, 200, code, body)
	assert.Equal(t, "hello", strings.TrimSpace(body), "the volume's data is served by the rebuilt generation")

	r = fixture.RunCLI(t, fixture.NormalBin(), a.State, nil, "ops", a.Name, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var ops []opJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &ops), r.String())
	var step string
	for _, op := range ops {
		if op.Kind != "deploy" || op.Outcome != "failed" {
			continue
		}
		for _, s := range op.Steps {
			if s.ID == "service.kv.replace" {
				step = s.Error + " | " + s.Detail
			}
		}
	}
	require.NotEmpty(t, step, "the killed deploy is journaled as failed: %s", r.Stdout)
	assert.Contains(t, step, "before it was journaled", "the journal says what happened")
	assert.NotContains(t, step, "before a candidate was created")
}

// TestStatus_FullDiskBeforeTheClaimIsNotShownAsDeployed: the state disk
// fills up between storing the new revision and claiming its deploy
// (ENOSPC on the claim): the deploy fails, the old generation serves, and
// status says the desired revision was never deployed instead of showing
// the previous deploy's success as if it were this one's.
func TestStatus_FullDiskBeforeTheClaimIsNotShownAsDeployed(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2efullclaim")
	host := "fullclaim.test"
	a.MustDeploy(webManifest(a.Name, v1, host, ""))
	before := appStatusFull(t, a.State, a.Name)

	a.Write(webManifest(a.Name, v2, host, ""))
	r := fixture.RunCLI(t, fixture.FaultBin(), a.State, []string{"GORDON_FAULT_FAIL=ClaimOp#1=ENOSPC"}, "deploy", "-f", a.File)
	require.NotEqual(t, 0, r.Code, "the deploy fails: %s", r.String())
	assert.Contains(t, r.Stderr, "no space left on device")

	after := appStatusFull(t, a.State, a.Name)
	require.NotEqual(t, before.Desired, after.Desired, "the new revision was stored")
	assert.True(t, after.DesiredUnclaimed, "status says the desired revision was never deployed: %+v", after)
	require.NotNil(t, after.LastOp)
	assert.Equal(t, before.LastOp.ID, after.LastOp.ID, "no op was journaled for it")
	assert.Equal(t, before.Desired, after.LastOp.Revision, "the last op is shown with the revision it deployed")
	text := fixture.RunCLI(t, fixture.NormalBin(), a.State, nil, "status", a.Name)
	assert.Contains(t, text.Stdout, after.Desired+" never deployed", text.Stdout)
	assert.Contains(t, text.Stdout, "no operation deployed it", text.Stdout)

	r = fixture.RunCLI(t, fixture.NormalBin(), a.State, nil, "deploy", "-f", a.File)
	require.Equal(t, 0, r.Code, r.String())
	assert.False(t, appStatusFull(t, a.State, a.Name).DesiredUnclaimed)
}

// statusFull is the part of `status APP --format json` the status tests read.
type statusFull struct {
	Desired          string `json:"desired"`
	DesiredUnclaimed bool   `json:"desired_unclaimed"`
	LastOp           *struct {
		ID       string `json:"id"`
		Revision string `json:"revision"`
		Outcome  string `json:"outcome"`
	} `json:"last_op"`
}

// appStatusFull reads `status APP --format json` with the normal build.
func appStatusFull(t testing.TB, stateDir, app string) statusFull {
	t.Helper()
	r := fixture.RunCLI(t, fixture.NormalBin(), stateDir, nil, "status", app, "--format", "json")
	require.Equal(t, 0, r.Code, "status: %s", r.String())
	var sts []statusFull
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &sts), r.String())
	require.Len(t, sts, 1, r.String())
	return sts[0]
}
