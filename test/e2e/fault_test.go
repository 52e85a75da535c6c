package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// The e2e part of the fault-injection suite (the core suite covers every
// boundary against the fakes): a real overlap deploy whose state-disk
// write fails (ENOSPC, EIO) at chosen store writes, under load. After each:
// the exit status matches the journal (0 only for a successful op), a
// reconcile converges to exactly one serving container that the edge
// routes, no marker is left, no plugin socket directory of the CLI is left
// in its temp dir, and no request failed.
func TestFault_StateDiskErrorsDuringDeployConverge(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2efault")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File
	host := "fault.test"
	fixture.WriteFile(t, file, webManifest(app, v1, host, ""))
	r := fixture.RunCLI(t, fixture.NormalBin(), state, nil, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	cur := checkConverged(t, state, app, "web", edge, host, "/", httpIdent)

	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/", host, 8, instanceOf)
	defer l.Stop()
	points := []string{
		"SaveOp#2=ENOSPC",        // the candidate's ID, before it starts
		"RegisterClaims#1=EIO",   // the candidate's port claims
		"SaveMarker#1=ENOSPC",    // the predecessor's retirement-pending marker
		"SaveActive#1=ENOSPC",    // publishing the new generation
		"SaveRecovery#1=EIO",     // the verified execution
		"ReleaseClaims#1=ENOSPC", // the predecessor's claims after retirement
		"ClearMarker#1=EIO",      // the predecessor's marker after retirement
	}
	for _, p := range points {
		t.Run(strings.NewReplacer("#", "_", "=", "_").Replace(p), func(t *testing.T) {
			// A short temp dir: plugin socket paths must stay under the
			// 108-byte unix socket limit.
			tmp, err := os.MkdirTemp("/tmp", "gf")
			require.NoError(t, err)
			t.Cleanup(func() { _ = os.RemoveAll(tmp) })
			_, failsBefore := l.Snapshot()
			fixture.WriteFile(t, file, webManifest(app, otherImage(cur.Image, v1, v2), host, ""))
			r := fixture.RunCLI(t, fixture.FaultBin(), state, []string{"GORDON_FAULT_FAIL=" + p, "TMPDIR=" + tmp}, "deploy", "-f", file)
			op := latestOpJSON(t, state, app)
			if r.Code == 0 {
				assert.Equal(t, "success", op.Outcome, "exit 0 but the journal says %q: %s", op.Outcome, r.String())
			} else {
				assert.NotEqual(t, "success", op.Outcome, "exit %d but the journal says success: %s", r.Code, r.String())
			}
			t.Logf("%s: exit %d, op %s %q", p, r.Code, op.ID, op.Outcome)
			left, _ := filepath.Glob(filepath.Join(tmp, "gordon-plugins-*"))
			assert.Empty(t, left, "plugin socket directories left by the CLI")
			rec := fixture.RunCLI(t, fixture.NormalBin(), state, nil, "reconcile", app)
			require.Equal(t, 0, rec.Code, "reconcile after %s: %s", p, rec.String())
			if r.Code != 0 {
				// The deploy's retry finishes what the fault stopped.
				r = fixture.RunCLI(t, fixture.NormalBin(), state, nil, "deploy", "-f", file)
				require.Equal(t, 0, r.Code, "retry after %s: %s", p, r.String())
			}
			cur = checkConverged(t, state, app, "web", edge, host, "/", httpIdent)
			waitMoreAnswers(t, l.Snapshot, 50)
			_, failsAfter := l.Snapshot()
			assert.Zero(t, failsAfter-failsBefore, "failed requests around %s: %v", p, l.Errors())
		})
	}
	st := l.Stop()
	t.Logf("load across %d fault points: %s", len(points), st)
	require.Zero(t, st.Transport+st.Non2xx, "failed requests: %s %v", st, st.Errors)
	_ = os.Remove(file)
}
