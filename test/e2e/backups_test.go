package e2e

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// backupOps are the app's ops with verb backup, oldest first.
func backupOps(t *testing.T, a *fixture.App) (ok, failed int) {
	t.Helper()
	r := a.Gordon("ops", a.Name, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var ops []struct {
		Verb    string `json:"verb"`
		Outcome string `json:"outcome"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &ops), r.Stdout)
	for _, op := range ops {
		switch {
		case op.Verb != "backup":
		case op.Outcome == "success":
			ok++
		case op.Outcome != "":
			failed++
		}
	}
	return ok, failed
}

// Scheduled backups (docs/data.md): with [services.kv.backup] every = "4s"
// and keep = 2, the reconcile watcher takes a backup every 4 seconds,
// each journaled as an op with verb backup, its requests held while the
// service stops (none fails), and keeps exactly the last 2.
func TestBackups_EveryFourSecondsTheWatcherKeepsExactlyTwo(t *testing.T) {
	kv := testimages.Require(t, "v1", "kv")["kv"]
	const host = "backups.test"
	a := fixture.NewApp(t, "e2ebackups")
	a.MustDeploy(kvManifest(a.Name, kv, host) + "[services.kv.backup]\nevery = \"4s\"\nkeep = 2\n")
	require.NoError(t, a.Edge.Put(host, "/k/greeting", "backed up"))

	l := fixture.StartLoad(t, "http://"+a.Edge.HTTPAddr+"/k/greeting", host, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, so, se := fixture.Command(ctx, fixture.NormalBin(), a.State, nil, "reconcile", "--watch", a.Name)
	t0 := time.Now()
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool {
		ok, failed := backupOps(t, a)
		require.Zero(t, failed, "failed backups")
		return ok >= 3
	}, time.Minute, 200*time.Millisecond, "3 scheduled backups")
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	res := fixture.Finish(cmd.Wait(), so, se, t0)
	st := l.Stop()
	ok, _ := backupOps(t, a)
	t.Logf("watcher ran %s: %d backups; load: %s", res.Elapsed.Round(time.Millisecond), ok, st)
	assert.Zero(t, st.Failed(), "failed requests: %v", st.Errors)

	var backups []snapListed
	for _, s := range snapshotsOf(t, a) {
		if s.Trigger == "backup" {
			backups = append(backups, s)
		}
	}
	assert.Len(t, backups, 2, "keep = 2 of %d backups", ok)
	assert.Equal(t, "backed up", getKV(t, a, host, "greeting"))
}
