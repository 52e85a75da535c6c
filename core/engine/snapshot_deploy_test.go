package engine_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// snapSeed seeds blog/web with volume data at /data (engine volume
// gordon-blog-data, content "v1 data") served by c-old, with an
// archiving runtime and a snapshot store.
func snapSeed(t *testing.T, mutate func(*core.ServiceSpec)) (*coretest.Harness, coretest.ArchiveRuntime, *snapshot.Store) {
	t.Helper()
	old := coretest.WebSpec(0)
	old.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
	if mutate != nil {
		mutate(&old)
	}
	h := depSeedWeb(t, old)
	ar := coretest.NewArchiveRuntime(h.Runtime)
	h.Engine.Runtime = ar
	store := snapshot.Open(t.TempDir())
	h.Engine.Snapshots = store
	ar.Mount("c-old", "/data", "gordon-blog-data")
	ar.SetVolume("gordon-blog-data", []byte("v1 data"))
	h.Runtime.NextIDs = []string{"c-new"}
	return h, ar, store
}

func snapNext(mutate func(*core.ServiceSpec)) core.ServiceSpec {
	next := depNewWeb(0)
	next.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
	if mutate != nil {
		mutate(&next)
	}
	return next
}

// A sequential replacement of a volume service stops the old generation,
// snapshots its volume from the stopped container, then removes it and
// creates the new one: the snapshot is journaled as its own step with its
// size and digest, bound to the op and the old revision.
func TestSnapshot_SequentialReplacementSnapshotsBetweenStopAndCreate(t *testing.T) {
	h, _, store := snapSeed(t, nil)
	res, err := depDeploy(t, h, engine.DeployRequest{}, snapNext(nil))
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, []string{"withdraw blog/web", "stop c-old", "export-volume c-old", "remove c-old", "create c-new", "start c-new"},
		h.Events.Seq("withdraw", "stop", "export-volume", "remove", "create", "start"))

	list, err := store.List("blog")
	require.NoError(t, err)
	require.Len(t, list, 1)
	m := list[0]
	assert.Equal(t, snapshot.TriggerDeploy, m.Trigger)
	assert.Equal(t, res.Op.ID, m.Op)
	assert.Equal(t, "rev-0", m.Revision)
	assert.Equal(t, "web", m.Service)
	require.Len(t, m.Volumes, 1)
	assert.Equal(t, "gordon-blog-data", m.Volumes[0].Name)
	assert.Equal(t, int64(len("v1 data")), m.Volumes[0].Size)

	st := depLastOp(t, h).Step("service.web.snapshot")
	require.NotNil(t, st)
	assert.Equal(t, core.StepSucceeded, st.State)
	assert.Contains(t, st.Detail, "snapshot "+m.ID+": 1 volume(s), 7 bytes")
	assert.Equal(t, "gordon-blog-data "+m.Volumes[0].Digest, st.Digest)
	assert.Contains(t, st.Phases, "data")
	require.Len(t, res.Services, 1, "the snapshot step is no service result")
	r, _, err := store.OpenVolume("blog", m.ID, "gordon-blog-data")
	require.NoError(t, err)
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "v1 data", string(b))
}

// before_deploy = "never" takes no snapshot, and the old generation is
// retired as before.
func TestSnapshot_PolicyNeverTakesNone(t *testing.T) {
	h, _, store := snapSeed(t, nil)
	_, err := depDeploy(t, h, engine.DeployRequest{}, snapNext(func(s *core.ServiceSpec) {
		s.SnapshotsBeforeDeploy = snapshot.PolicyNever
	}))
	require.NoError(t, err)
	assert.Zero(t, h.Events.Count("export-volume", "c-old"))
	list, err := store.List("blog")
	require.NoError(t, err)
	assert.Empty(t, list)
}

// A failed snapshot fails the deploy before the new generation is
// created: the old generation is started again and routed, its marker
// cleared, nothing partial is kept, and the error says nothing changed.
func TestSnapshot_FailedSnapshotRestartsTheOldGeneration(t *testing.T) {
	h, _, store := snapSeed(t, nil)
	h.Runtime.Fail(coretest.MExportVolume, "c-old", errors.New("disk full"), 1)
	_, err := depDeploy(t, h, engine.DeployRequest{}, snapNext(nil))
	require.Error(t, err)
	assert.ErrorContains(t, err, "disk full")
	assert.ErrorContains(t, err, "serves again and nothing changed")
	assert.Zero(t, h.Events.Count("create", "c-new"), "no candidate")
	assert.Zero(t, h.Events.Count("remove", "c-old"))
	assert.Equal(t, []string{"stop c-old", "start c-old"}, h.Events.Seq("stop", "start"))
	a, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, "c-old", a.Services["web"].Container)
	assert.Nil(t, a.Services["web"].HoldUntil)
	assert.NotEmpty(t, a.Services["web"].BackendBinds)
	assert.Empty(t, h.Store.Markers("blog"))
	list, err := store.List("blog")
	require.NoError(t, err)
	assert.Empty(t, list)
	swept, err := store.Sweep("blog")
	require.NoError(t, err)
	assert.Empty(t, swept, "the failed snapshot left no partial files")
	assert.Equal(t, core.StepFailed, depLastOp(t, h).Step("service.web.snapshot").State)
}

// Retention by keep: a replacement keeps only the newest keep snapshots
// taken before replacements of the service.
func TestSnapshot_KeepBoundsTheDeploySnapshots(t *testing.T) {
	h, ar, store := snapSeed(t, nil)
	keep1 := func(s *core.ServiceSpec) { s.SnapshotsKeep = 1 }
	_, err := depDeploy(t, h, engine.DeployRequest{}, snapNext(keep1))
	require.NoError(t, err)
	ar.SetVolume("gordon-blog-data", []byte("v2 data"))
	h.Runtime.NextIDs = []string{"c-3"}
	_, err = depDeploy(t, h, engine.DeployRequest{}, snapNext(func(s *core.ServiceSpec) { keep1(s); s.Image = "registry.example/blog:1.6" }))
	require.NoError(t, err)
	list, err := store.List("blog")
	require.NoError(t, err)
	require.Len(t, list, 1)
	r, _, err := store.OpenVolume("blog", list[0].ID, "gordon-blog-data")
	require.NoError(t, err)
	b, _ := io.ReadAll(r)
	assert.Equal(t, "v2 data", string(b), "the newest one is kept")
}

// rollback --with-data restores, in the sequential replacement, the
// snapshot taken before the deploy being rolled back: the old code and
// the data it had. What the volume held is snapshotted first.
func TestSnapshot_RollbackWithDataRestoresTheDataOfBeforeTheDeploy(t *testing.T) {
	h, ar, store := snapSeed(t, nil)
	res, err := depDeploy(t, h, engine.DeployRequest{}, snapNext(nil))
	require.NoError(t, err)
	ar.SetVolume("gordon-blog-data", []byte("v2 wrote this"))
	h.Runtime.NextIDs = []string{"c-3"}
	h.Reset()
	rb, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog", ToRevision: "rev-0", WithData: true})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, rb.Outcome)
	assert.Equal(t, "v1 data", string(ar.Volume("gordon-blog-data")))
	assert.Equal(t, []string{"stop c-new", "export-volume c-new", "restore-volume gordon-blog-data", "remove c-new", "create c-3", "start c-3"},
		h.Events.Seq("stop", "export-volume", "restore-volume", "remove", "create", "start"))
	op := depLastOp(t, h)
	restored := op.Step("service.web.restore")
	require.NotNil(t, restored)
	assert.Equal(t, core.StepSucceeded, restored.State)
	list, err := store.List("blog")
	require.NoError(t, err)
	require.Len(t, list, 2, "the one before the deploy, and the one before the rollback")
	assert.Equal(t, res.Op.ID, list[0].Op)
	assert.Contains(t, restored.Detail, "restored snapshot "+list[0].ID)
	assert.Equal(t, op.ID, list[1].Op)
}

// Without --with-data a rollback keeps the data and says so, naming the
// snapshot; --with-data with no snapshot is refused before anything
// changes.
func TestSnapshot_RollbackWithoutDataNamesTheSnapshotAndRefusesWithoutOne(t *testing.T) {
	h, ar, store := snapSeed(t, func(s *core.ServiceSpec) {})
	// No snapshot exists yet: the seeded generation was never replaced.
	_, err := depDeploy(t, h, engine.DeployRequest{}, snapNext(func(s *core.ServiceSpec) {
		s.SnapshotsBeforeDeploy = snapshot.PolicyNever
	}))
	require.NoError(t, err)
	h.Reset()
	_, err = h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog", ToRevision: "rev-0", WithData: true})
	require.ErrorIs(t, err, core.ErrConflict)
	assert.ErrorContains(t, err, "has no snapshot taken before the deploy being rolled back")
	assert.Empty(t, h.Events.Seq("stop", "create", "remove", "withdraw"), "nothing changed")

	ar.SetVolume("gordon-blog-data", []byte("v2 data"))
	h.Runtime.NextIDs = []string{"c-3"}
	_, err = depDeploy(t, h, engine.DeployRequest{}, snapNext(func(s *core.ServiceSpec) { s.Image = "registry.example/blog:1.6" }))
	require.NoError(t, err)
	list, err := store.List("blog")
	require.NoError(t, err)
	require.Len(t, list, 1)
	h.Runtime.NextIDs = []string{"c-4"}
	rb, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog", ToRevision: "rev-0"})
	require.NoError(t, err)
	require.Len(t, rb.Warnings, 1)
	assert.Contains(t, rb.Warnings[0].Detail, "the rollback restored the code, not the data")
	assert.Contains(t, rb.Warnings[0].Detail, "snapshots restore blog "+list[0].ID)
	assert.Equal(t, "v2 data", string(ar.Volume("gordon-blog-data")), "the data is kept")
}

// snapshots create holds the service while it stops, snapshots it from
// the stopped container and starts it again in place; snapshots restore
// does the same with the restore (after a snapshot of what the volume
// held), journaled as restarts with their verbs.
func TestSnapshot_CreateAndRestoreRestartInPlace(t *testing.T) {
	h, ar, store := snapSeed(t, nil)
	res, taken, err := h.Engine.SnapshotCreate(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	require.Len(t, taken, 1)
	assert.Equal(t, snapshot.TriggerManual, taken[0].Trigger)
	assert.Equal(t, "snapshot", res.Op.Verb)
	assert.Equal(t, []string{"stop c-old", "export-volume c-old", "start c-old"}, h.Events.Seq("stop", "export-volume", "start", "create", "remove"))

	ar.SetVolume("gordon-blog-data", []byte("changed"))
	h.Reset()
	res, err = h.Engine.SnapshotRestore(h.Ctx(), "blog", taken[0].ID, "")
	require.NoError(t, err)
	assert.Equal(t, "restore", res.Op.Verb)
	assert.Equal(t, "v1 data", string(ar.Volume("gordon-blog-data")))
	assert.Equal(t, []string{"stop c-old", "export-volume c-old", "restore-volume gordon-blog-data", "start c-old"},
		h.Events.Seq("stop", "export-volume", "restore-volume", "start", "create", "remove"))
	list, err := store.List("blog")
	require.NoError(t, err)
	assert.Len(t, list, 2, "the restore kept what the volume held first")

	_, err = h.Engine.SnapshotRestore(h.Ctx(), "blog", "20990101-000000.000-web-0000", "")
	assert.ErrorIs(t, err, core.ErrNotFound)
}

// A snapshot a crash cut off (its files written, its manifest not) is
// never listed, and the next reconcile removes it.
func TestSnapshot_ReconcileRemovesAPartialSnapshot(t *testing.T) {
	h, _, _ := snapSeed(t, nil)
	dir := t.TempDir()
	store := snapshot.Open(dir)
	h.Engine.Snapshots = store
	partial := filepath.Join(dir, "snapshots", "blog", "20261204-000000.000-web-abcd")
	require.NoError(t, os.MkdirAll(partial, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(partial, "gordon-blog-data.tar.zst"), []byte("cut off"), 0o600))
	list, err := store.List("blog")
	require.NoError(t, err)
	assert.Empty(t, list, "a snapshot without its manifest is not listed")
	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	assert.NoDirExists(t, partial)
}

// [services.X.backup]: a backup falls due every interval, counted from
// the serving generation's activation, then from the last backup; each
// is a restart journaled with verb backup whose snapshot (trigger backup)
// is taken between the stop and the start; keep bounds them.
func TestBackup_DueEveryIntervalJournaledAsBackupAndBoundedByKeep(t *testing.T) {
	h, _, store := snapSeed(t, func(s *core.ServiceSpec) {
		s.BackupEvery, s.BackupKeep = core.Duration(4*time.Second), 2
	})
	due, err := h.Engine.DueBackups(h.Ctx(), coretest.T0.Add(3*time.Second))
	require.NoError(t, err)
	assert.Empty(t, due, "not due before its interval from the activation")
	due, err = h.Engine.DueBackups(h.Ctx(), coretest.T0.Add(5*time.Second))
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.Equal(t, "blog", due[0].App)
	assert.Equal(t, "web", due[0].Service)
	assert.Equal(t, coretest.T0.Add(4*time.Second), due[0].Due)

	for i := range 3 {
		h.Reset()
		res, err := h.Engine.Backup(h.Ctx(), "blog", "web")
		require.NoError(t, err, "backup %d", i)
		assert.Equal(t, core.OutcomeSuccess, res.Outcome)
		assert.Equal(t, "backup", res.Op.Verb)
		assert.Equal(t, []string{"stop c-old", "export-volume c-old", "start c-old"}, h.Events.Seq("stop", "export-volume", "start", "create", "remove"))
	}
	list, err := store.List("blog")
	require.NoError(t, err)
	require.Len(t, list, 2, "keep = 2")
	for _, m := range list {
		assert.Equal(t, snapshot.TriggerBackup, m.Trigger)
	}
	last := list[1].CreatedAt
	due, err = h.Engine.DueBackups(h.Ctx(), last.Add(3*time.Second))
	require.NoError(t, err)
	assert.Empty(t, due, "counted from the last backup")
	due, err = h.Engine.DueBackups(h.Ctx(), last.Add(time.Hour))
	require.NoError(t, err)
	assert.Len(t, due, 1, "however many were missed, one is due")
}

// A failed scheduled backup fails its op, the service serves again, and
// the failure is sent to the app's [notify] webhook as verb backup.
func TestBackup_AFailedBackupIsNotified(t *testing.T) {
	h, _, store := snapSeed(t, nil)
	recv := newNotifyReceiver(t, 0)
	web := coretest.WebSpec(0)
	web.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
	web.BackupEvery = core.Duration(time.Hour)
	spec := coretest.BlogApp(web)
	spec.Notify = &core.NotifySpec{Webhook: recv.srv.URL}
	rev, err := h.Engine.SubmitRevision(h.Ctx(), spec, "sha-backup")
	require.NoError(t, err)
	h.Runtime.Fail(coretest.MExportVolume, "c-old", errors.New("disk full"), 1)
	res, err := h.Engine.Backup(h.Ctx(), "blog", "web")
	require.Error(t, err)
	assert.ErrorContains(t, err, "disk full")
	assert.Equal(t, core.OutcomeFailed, res.Outcome)
	assert.Equal(t, []string{"stop c-old", "start c-old"}, h.Events.Seq("stop", "start"))
	list, err := store.List("blog")
	require.NoError(t, err)
	assert.Empty(t, list)
	notified(t, h)
	docs, _, _ := recv.got()
	require.Len(t, docs, 1)
	assert.Equal(t, "backup", docs[0].Verb)
	assert.Equal(t, rev.ID, docs[0].Revision)
	assert.Equal(t, core.OutcomeFailed, docs[0].Outcome)
	assert.Contains(t, docs[0].Error, "disk full")
}

// dumpSeed is snapSeed with a scheduled backup by command whose script
// writes payload to stdout and a line to stderr, then exits with code.
func dumpSeed(t *testing.T, payload string, code int) (*coretest.Harness, *snapshot.Store) {
	t.Helper()
	h, _, store := snapSeed(t, func(s *core.ServiceSpec) {
		s.BackupEvery, s.BackupKeep = core.Duration(time.Hour), 2
		s.BackupCommand = []string{"pg_dumpall", "-U", "postgres"}
	})
	h.Runtime.SetStream(func(_ context.Context, _ string, _ core.ExecSpec, stdout io.Writer, stderr func(string)) (int, error) {
		if _, err := io.WriteString(stdout, payload); err != nil {
			return -1, err
		}
		stderr("pg_dumpall: connection to server failed")
		return code, nil
	})
	return h, store
}

// With [services.X.backup] command, a scheduled backup is an online dump:
// the command runs by exec in the serving container, nothing stops, and
// its output is kept byte for byte as a snapshot (trigger backup) bounded
// by keep, journaled as op verb backup with a dump step; a dump is never
// restored into the volumes.
func TestBackup_CommandTakesAnOnlineDumpWithoutAStop(t *testing.T) {
	payload := "-- PostgreSQL database cluster dump\n\x00\xffCREATE TABLE t (x int);\n"
	h, store := dumpSeed(t, payload, 0)
	for i := range 3 {
		h.Reset()
		res, err := h.Engine.Backup(h.Ctx(), "blog", "web")
		require.NoError(t, err, "backup %d", i)
		assert.Equal(t, core.OutcomeSuccess, res.Outcome)
		assert.Equal(t, "backup", res.Op.Verb)
		act, err := h.Store.LoadActive(h.Ctx(), "blog")
		require.NoError(t, err)
		assert.Equal(t, act.Services["web"].EffectiveRevision, res.Op.Revision, "ops names the revision whose data was dumped")
		assert.NotEmpty(t, res.Op.Revision)
		assert.Equal(t, []string{"exec c-old"}, h.Events.Seq("stop", "start", "export-volume", "exec", "create", "remove"))
		st := res.Op.Step("service.web.dump")
		require.NotNil(t, st)
		assert.Equal(t, core.StepSucceeded, st.State)
		assert.Regexp(t, `^dump sha256:[0-9a-f]{64}$`, st.Digest)
	}
	assert.Equal(t, []string{"pg_dumpall", "-U", "postgres"}, h.Runtime.Execs()[0].Spec.Cmd)
	list, err := store.List("blog")
	require.NoError(t, err)
	require.Len(t, list, 2, "keep = 2")
	for _, m := range list {
		assert.Equal(t, snapshot.TriggerBackup, m.Trigger)
		assert.True(t, m.IsDump())
		r, _, err := store.OpenVolume("blog", m.ID, "dump")
		require.NoError(t, err)
		got, err := io.ReadAll(r)
		r.Close()
		require.NoError(t, err)
		assert.Equal(t, payload, string(got))
	}

	h.Reset()
	_, err = h.Engine.SnapshotRestore(h.Ctx(), "blog", list[0].ID, "")
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorContains(t, err, "snapshots export blog "+list[0].ID+" --dump")
	assert.Empty(t, h.Events.Seq("stop", "restore-volume"), "a refusal changes nothing")
}

// A dump whose command fails keeps nothing, fails its op with the
// command's status and last stderr lines, and stops nothing.
func TestBackup_AFailedDumpKeepsNothingAndSaysWhy(t *testing.T) {
	h, store := dumpSeed(t, "half a dump", 2)
	res, err := h.Engine.Backup(h.Ctx(), "blog", "web")
	require.Error(t, err)
	assert.ErrorContains(t, err, "the command exited with status 2: pg_dumpall: connection to server failed")
	assert.Equal(t, core.OutcomeFailed, res.Outcome)
	assert.Empty(t, h.Events.Seq("stop", "start"))
	list, err := store.List("blog")
	require.NoError(t, err)
	assert.Empty(t, list)
	partial, err := store.Partial("blog")
	require.NoError(t, err)
	assert.Empty(t, partial, "nothing of the dump is left behind")
}

// A dump that outlives its timeout is abandoned and says which setting
// bounds it.
func TestBackup_ADumpPastItsTimeoutFails(t *testing.T) {
	h, _, store := snapSeed(t, func(s *core.ServiceSpec) {
		s.BackupEvery, s.BackupTimeout = core.Duration(time.Hour), core.Duration(20*time.Millisecond)
		s.BackupCommand = []string{"pg_dumpall"}
	})
	h.Runtime.SetStream(func(ctx context.Context, _ string, _ core.ExecSpec, _ io.Writer, _ func(string)) (int, error) {
		<-ctx.Done()
		return -1, ctx.Err()
	})
	_, err := h.Engine.Backup(h.Ctx(), "blog", "web")
	require.Error(t, err)
	assert.ErrorContains(t, err, "did not finish within its timeout 20ms, and the engine cannot stop a command it runs in a container, so it may still be running there (restarting the service ends it); raise [services.web.backup] timeout")
	list, err := store.List("blog")
	require.NoError(t, err)
	assert.Empty(t, list)
}

// A service without a volume can be backed up by command: it falls due
// like any backup.
func TestBackup_ACommandBackupNeedsNoVolume(t *testing.T) {
	web := coretest.WebSpec(0)
	web.BackupEvery, web.BackupCommand = core.Duration(4*time.Second), []string{"dump"}
	h := depSeedWeb(t, web)
	h.Engine.Snapshots = snapshot.Open(t.TempDir())
	h.Runtime.SetStream(func(_ context.Context, _ string, _ core.ExecSpec, stdout io.Writer, _ func(string)) (int, error) {
		_, err := io.WriteString(stdout, "dumped")
		return 0, err
	})
	due, err := h.Engine.DueBackups(h.Ctx(), coretest.T0.Add(5*time.Second))
	require.NoError(t, err)
	require.Len(t, due, 1)
	res, err := h.Engine.Backup(h.Ctx(), "blog", "web")
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
}

// A command that cannot start (the engine answers 126 and says why on
// standard output) fails the dump with the engine's reason.
func TestBackup_ADumpWhoseProgramIsMissingSaysSo(t *testing.T) {
	h, _ := dumpSeed(t, "", 0)
	h.Runtime.SetStream(func(_ context.Context, _ string, _ core.ExecSpec, stdout io.Writer, _ func(string)) (int, error) {
		_, err := io.WriteString(stdout, "OCI runtime exec failed: exec: \"pg_dumpall\": executable file not found in $PATH: unknown\r\n")
		return 126, err
	})
	_, err := h.Engine.Backup(h.Ctx(), "blog", "web")
	require.Error(t, err)
	assert.ErrorContains(t, err, `the command could not be started in the container (status 126: its program is missing or not executable there): OCI runtime exec failed: exec: "pg_dumpall": executable file not found in $PATH: unknown`)
}

// What a failed dump's error quotes of the command's output is safe to
// journal and send: the service's secret values are masked, each line is
// cut at 300 bytes, and the dump itself is never quoted; a command that
// writes nothing on its standard output fails (it wrote its dump
// elsewhere), so it cannot push good backups out of keep.
func TestBackup_ADumpErrorQuotesNoSecretNoDumpAndNoHugeLine(t *testing.T) {
	h, store := dumpSeed(t, "", 0)
	require.NoError(t, h.Store.SetSecret(h.Ctx(), "blog", "web", "dbpw", []byte("S3cr3tValue")))
	active, ok := h.Store.Active("blog")
	require.True(t, ok)
	as := active.Services["web"]
	as.Spec.Secrets = []core.SecretRef{{Env: "DBPW", Name: "dbpw"}}
	require.NoError(t, h.Store.SaveActive(h.Ctx(), active))

	h.Runtime.SetStream(func(_ context.Context, _ string, _ core.ExecSpec, stdout io.Writer, stderr func(string)) (int, error) {
		_, err := io.WriteString(stdout, "CREATE TABLE secret_rows (x int);\n")
		stderr("password S3cr3tValue rejected")
		stderr(strings.Repeat("e", 5000))
		return 1, err
	})
	_, err := h.Engine.Backup(h.Ctx(), "blog", "web")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "password **** rejected")
	assert.NotContains(t, err.Error(), "S3cr3tValue")
	assert.NotContains(t, err.Error(), "CREATE TABLE", "the dump is not quoted")
	assert.Less(t, len(err.Error()), 1000, "each quoted line is cut")

	h.Runtime.SetStream(nil)
	_, err = h.Engine.Backup(h.Ctx(), "blog", "web")
	require.Error(t, err)
	assert.ErrorContains(t, err, "wrote nothing on its standard output")
	list, err := store.List("blog")
	require.NoError(t, err)
	assert.Empty(t, list)
}
