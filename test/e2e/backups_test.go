package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/loadgen"
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

// watchBackups runs `reconcile --watch` under load on the app's kv key
// greeting until n backups succeeded (none may fail), and returns how
// many there were and the load's stats.
func watchBackups(t *testing.T, a *fixture.App, host string, n int) (int, loadgen.HTTPStats) {
	t.Helper()
	l := fixture.StartLoad(t, "http://"+a.Edge.HTTPAddr+"/k/greeting", host, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, so, se := fixture.Command(ctx, fixture.NormalBin(), a.State, nil, "reconcile", "--watch", a.Name)
	t0 := time.Now()
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool {
		ok, failed := backupOps(t, a)
		require.Zero(t, failed, "failed backups")
		return ok >= n
	}, time.Minute, 200*time.Millisecond, "%d scheduled backups", n)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	res := fixture.Finish(cmd.Wait(), so, se, t0)
	st := l.Stop()
	ok, _ := backupOps(t, a)
	t.Logf("watcher ran %s: %d backups; load: %s", res.Elapsed.Round(time.Millisecond), ok, st)
	return ok, st
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

	ok, st := watchBackups(t, a, host, 3)
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

// An online dump ([services.kv.backup] command, docs/data.md): the
// watcher runs `/kv dump` by exec in the serving container, under load,
// with no stop and no restart (the same container, started once); the
// dump is listed as a snapshot of kind dump, `snapshots export --dump`
// writes exactly what the command wrote (the store's JSON), and
// `snapshots restore` refuses it, naming the way to load it.
func TestBackups_ACommandTakesAnOnlineDumpWithNoStop(t *testing.T) {
	kv := testimages.Require(t, "v1", "kv")["kv"]
	const host = "dump.test"
	a := fixture.NewApp(t, "e2edump")
	a.MustDeploy(kvManifest(a.Name, kv, host) + "[services.kv.backup]\nevery = \"4s\"\nkeep = 2\ncommand = [\"/kv\", \"dump\"]\n")
	require.NoError(t, a.Edge.Put(host, "/k/greeting", "dumped online"))
	ids := fixture.Running(a.Name, "kv")
	require.Len(t, ids, 1)
	started := func() string {
		out, err := exec.Command("docker", "inspect", "-f", "{{.State.StartedAt}}", ids[0]).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	before := started()

	_, st := watchBackups(t, a, host, 2)
	assert.Zero(t, st.Failed(), "failed requests: %v", st.Errors)
	assert.Equal(t, ids, fixture.Running(a.Name, "kv"), "the serving container is the same")
	assert.Equal(t, before, started(), "and it was never restarted")

	var dumps []snapListed
	for _, s := range snapshotsOf(t, a) {
		if s.Trigger == "backup" {
			require.Len(t, s.Volumes, 1)
			assert.Equal(t, "dump", s.Volumes[0].Kind)
			dumps = append(dumps, s)
		}
	}
	require.Len(t, dumps, 2, "keep = 2")
	r := a.Gordon("snapshots", "export", a.Name, dumps[1].ID, "--dump")
	require.Equal(t, 0, r.Code, r.String())
	assert.JSONEq(t, `{"greeting": "dumped online"}`, r.Stdout, "the dump is the store's JSON, byte for byte as /kv dump wrote it")
	assert.Equal(t, string(volumeFiles(t, a.Name, "kv")["data/kv.json"]), r.Stdout)

	r = a.Gordon("snapshots", "restore", a.Name, dumps[1].ID)
	assert.NotEqual(t, 0, r.Code)
	assert.Contains(t, r.Stderr, "is an online dump by `/kv dump`")
	assert.Equal(t, before, started(), "a refusal changes nothing")
}
