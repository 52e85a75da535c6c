package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// `snapshots create` of a service with no volume but a backup command
// takes an online dump on demand: no stop, trigger manual (outside the
// scheduled backups' keep), journaled as verb snapshot; a service with
// neither is refused and nothing runs.
func TestSnapshotCreate_AServiceWithOnlyABackupCommandIsDumpedOnDemand(t *testing.T) {
	web := coretest.WebSpec(0)
	web.BackupEvery, web.BackupKeep, web.BackupCommand = core.Duration(time.Hour), 1, []string{"dump"}
	h := depSeedWeb(t, web)
	store := snapshot.Open(t.TempDir())
	h.Engine.Snapshots = store
	h.Runtime.SetStream(func(_ context.Context, _ string, _ core.ExecSpec, stdout io.Writer, _ func(string)) (int, error) {
		_, err := io.WriteString(stdout, "dumped")
		return 0, err
	})
	for range 2 {
		h.Reset()
		res, taken, err := h.Engine.SnapshotCreate(h.Ctx(), engine.LifecycleRequest{App: "blog", Services: []string{"web"}})
		require.NoError(t, err)
		require.Len(t, taken, 1)
		assert.Equal(t, snapshot.TriggerManual, taken[0].Trigger)
		assert.True(t, taken[0].IsDump())
		assert.Equal(t, "snapshot", res.Op.Verb)
		assert.NotNil(t, res.Op.Step("service.web.dump"))
		assert.Empty(t, h.Events.Seq("stop", "start", "export-volume"), "an online dump stops nothing")
	}
	_, err := h.Engine.Backup(h.Ctx(), "blog", "web")
	require.NoError(t, err)
	list, err := store.List("blog")
	require.NoError(t, err)
	assert.Len(t, list, 3, "a scheduled backup's keep = 1 removes no manual dump")

	plain := depSeedWeb(t, coretest.WebSpec(0))
	plain.Engine.Snapshots = snapshot.Open(t.TempDir())
	_, _, err = plain.Engine.SnapshotCreate(plain.Ctx(), engine.LifecycleRequest{App: "blog", Services: []string{"web"}})
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorContains(t, err, "service web has no volume and no backup command")
	assert.Empty(t, plain.Runtime.Execs())
}

// While a backup runs, the app lock's holder names it: a verb that waits
// says "backup", not the restart its op is journaled as.
func TestBackup_TheLockHolderNamesTheBackup(t *testing.T) {
	h, _ := dumpSeed(t, "x", 0)
	started, release := make(chan struct{}), make(chan struct{})
	h.Runtime.SetStream(func(_ context.Context, _ string, _ core.ExecSpec, stdout io.Writer, _ func(string)) (int, error) {
		close(started)
		<-release
		_, err := io.WriteString(stdout, "dumped")
		return 0, err
	})
	done := make(chan error, 1)
	go func() {
		_, err := h.Engine.Backup(h.Ctx(), "blog", "web")
		done <- err
	}()
	<-started
	holder, err := h.Store.LockHolder(h.Ctx(), "blog")
	close(release)
	require.NoError(t, err)
	assert.Equal(t, "backup", holder.Verb)
	require.NoError(t, <-done)
}

// A backup that outlasts its every is not due again the moment it ends:
// the next waits a short gap, so a verb waiting for the app lock gets it
// between two backups.
func TestBackup_ABackupLongerThanItsEveryIsNotDueBackToBack(t *testing.T) {
	web := coretest.WebSpec(0)
	web.BackupEvery, web.BackupCommand = core.Duration(4*time.Second), []string{"dump"}
	h := depSeedWeb(t, web)
	store := snapshot.Open(t.TempDir())
	h.Engine.Snapshots = store
	start := coretest.T0.Add(time.Minute)
	w, err := store.Begin(snapshot.Manifest{ID: store.NewID("web"), App: "blog", Service: "web", Trigger: snapshot.TriggerBackup, CreatedAt: start})
	require.NoError(t, err)
	_, err = w.AddDump(func(out io.Writer) error { _, err := io.WriteString(out, "dumped"); return err })
	require.NoError(t, err)
	m := w.Manifest()
	m.Command, m.Duration = []string{"dump"}, core.Duration(10*time.Second)
	_, err = w.Commit(m)
	require.NoError(t, err)

	due, err := h.Engine.DueBackups(h.Ctx(), start.Add(10*time.Second+500*time.Millisecond))
	require.NoError(t, err)
	assert.Empty(t, due, "just after a backup ended, past its every")
	due, err = h.Engine.DueBackups(h.Ctx(), start.Add(13*time.Second))
	require.NoError(t, err)
	assert.Len(t, due, 1, "due once the gap has passed")
}

// forgeVolume rewrites snapshot id of blog in store dir so that its one
// volume is recorded as name mounted at path (an imported snapshot brings
// whatever its manifest says).
func forgeVolume(t *testing.T, dir, id, name, path string) {
	t.Helper()
	snap := filepath.Join(dir, "snapshots", "blog", id)
	b, err := os.ReadFile(filepath.Join(snap, "manifest.json"))
	require.NoError(t, err)
	var m snapshot.Manifest
	require.NoError(t, json.Unmarshal(b, &m))
	require.NoError(t, os.Rename(filepath.Join(snap, m.Volumes[0].File()), filepath.Join(snap, name+".tar.zst")))
	m.Volumes[0].Name, m.Volumes[0].Path = name, path
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(snap, "manifest.json"), b, 0o600))
}

// A restore writes into the service's own volume at the snapshot's mount
// path, never into the volume name the manifest records (an imported
// snapshot's could name another app's volume, or any volume on the
// engine); a snapshot of a path the service does not mount is refused
// before anything changes.
func TestSnapshot_ARestoreWritesOnlyIntoTheServicesOwnVolumes(t *testing.T) {
	h, ar, _ := snapSeed(t, nil)
	dir := t.TempDir()
	store := snapshot.Open(dir)
	h.Engine.Snapshots = store
	_, taken, err := h.Engine.SnapshotCreate(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	forgeVolume(t, dir, taken[0].ID, "victim", "/data")
	ar.SetVolume("victim", []byte("precious"))
	ar.SetVolume("gordon-blog-data", []byte("changed"))
	h.Reset()
	_, err = h.Engine.SnapshotRestore(h.Ctx(), "blog", taken[0].ID, "")
	require.NoError(t, err)
	assert.Equal(t, "v1 data", string(ar.Volume("gordon-blog-data")), "restored into the service's volume at /data")
	assert.Equal(t, "precious", string(ar.Volume("victim")), "the volume the manifest names is untouched")

	_, taken, err = h.Engine.SnapshotCreate(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	forgeVolume(t, dir, taken[0].ID, "gordon-blog-data", "/elsewhere")
	h.Reset()
	_, err = h.Engine.SnapshotRestore(h.Ctx(), "blog", taken[0].ID, "")
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorContains(t, err, "mounts no named volume there")
	assert.Empty(t, h.Events.Seq("stop", "restore-volume"), "a refusal changes nothing")
}

// A restore cut off by a crash may leave part of the snapshot in the
// volume; reconcile puts back the data the op snapshotted just before the
// restore, then starts the service, and the step says so (a breaker saw
// the service started on a half-restored volume, reported "ok").
func TestSnapshot_ReconcilePutsBackTheDataOfAnInterruptedRestore(t *testing.T) {
	h, ar, store := snapSeed(t, nil)
	_, taken, err := h.Engine.SnapshotCreate(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	target := taken[0].ID

	// The crashed restore: it had snapshotted what the volume held (v2),
	// then was cut off while writing the target into it.
	w, err := store.Begin(snapshot.Manifest{ID: store.NewID("web"), App: "blog", Service: "web", Trigger: snapshot.TriggerManual, Op: "op-r", Verb: "restore", CreatedAt: coretest.T0})
	require.NoError(t, err)
	_, err = w.AddVolume("gordon-blog-data", "/data", func(out io.Writer) error { _, err := io.WriteString(out, "v2 data"); return err })
	require.NoError(t, err)
	_, err = w.Commit(w.Manifest())
	require.NoError(t, err)
	h.SeedOp(core.Operation{ID: "op-r", Kind: core.OpRestart, Verb: "restore", App: "blog", Steps: []core.Step{
		{ID: "service.web.snapshot", State: core.StepSucceeded, Service: "web"},
		{ID: "service.web.restore", State: core.StepPending, Service: "web", Detail: "restore snapshot " + target},
	}})
	h.Runtime.SetState("c-old", core.StatusExited, coretest.T0)
	ar.SetVolume("gordon-blog-data", []byte("half of v1"))

	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.Equal(t, "v2 data", string(ar.Volume("gordon-blog-data")), "the data from before the restore is back")
	op, err := h.Store.LoadOp(h.Ctx(), "blog", "op-r")
	require.NoError(t, err)
	st := op.Step("service.web.restore")
	require.NotNil(t, st)
	assert.Equal(t, core.StepFailed, st.State)
	assert.Contains(t, st.Error, "interrupted while restoring a snapshot")
	assert.Contains(t, st.Error, "reconcile put back the data from snapshot")

	h.Reset()
	ar.SetVolume("gordon-blog-data", []byte("written since"))
	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.Equal(t, "written since", string(ar.Volume("gordon-blog-data")), "put back once, never again")
}

// `snapshots create APP` dumps every service with only a backup command:
// one that fails does not stop the others, the result has a row for each,
// and the error names the one that failed.
func TestSnapshotCreate_AFailedDumpDoesNotStopTheOthers(t *testing.T) {
	a, b := coretest.WebSpec(0), coretest.WebSpec(0)
	a.Name, b.Name = "a", "b"
	a.HTTP[0].Host, b.HTTP[0].Host = "a.example.com", "b.example.com"
	a.BackupEvery, a.BackupCommand = core.Duration(time.Hour), []string{"dump"}
	b.BackupEvery, b.BackupCommand = core.Duration(time.Hour), []string{"dump"}
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(a, b), map[string]string{"a": "c-a", "b": "c-b"}, map[string]map[int]int{"a": {8080: 17000}, "b": {8080: 17001}})
	h.Engine.Snapshots = snapshot.Open(t.TempDir())
	h.Runtime.SetStream(func(_ context.Context, id string, _ core.ExecSpec, stdout io.Writer, stderr func(string)) (int, error) {
		if id == "c-a" {
			stderr("could not connect")
			return 1, nil
		}
		_, err := io.WriteString(stdout, "dumped")
		return 0, err
	})
	res, taken, err := h.Engine.SnapshotCreate(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	assert.ErrorContains(t, err, "could not connect")
	require.Len(t, taken, 1, "b is dumped although a failed")
	assert.Equal(t, "b", taken[0].Service)
	require.NotNil(t, res)
	var names []string
	for _, s := range res.Services {
		names = append(names, s.Service)
	}
	assert.ElementsMatch(t, []string{"a", "b"}, names)
}

// cancelOnExport is an archive runtime whose export is where the verb is
// interrupted (Ctrl-C, SIGTERM): it cancels the verb's context.
type cancelOnExport struct {
	coretest.ArchiveRuntime
	cancel func()
}

func (c cancelOnExport) ExportVolume(ctx context.Context, _, _ string, _ io.Writer) error {
	c.cancel()
	return ctx.Err()
}

// A snapshots create interrupted while the service is stopped for its
// snapshot starts the service again before it returns (a breaker's
// SIGTERM left it stopped until a reconcile).
func TestSnapshot_AnInterruptedCreateStartsTheServiceAgain(t *testing.T) {
	h, ar, _ := snapSeed(t, nil)
	ctx, cancel := context.WithCancel(h.Ctx())
	defer cancel()
	h.Engine.Runtime = cancelOnExport{ArchiveRuntime: ar, cancel: cancel}
	_, _, err := h.Engine.SnapshotCreate(ctx, engine.LifecycleRequest{App: "blog"})
	require.Error(t, err)
	st, ok := h.Runtime.State("c-old")
	require.True(t, ok)
	assert.Equal(t, core.StatusRunning, st.Status, "the service serves again")
	assert.Equal(t, []string{"stop c-old", "start c-old"}, h.Events.Seq("stop", "start"))
}
