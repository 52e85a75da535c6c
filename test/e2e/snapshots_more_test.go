package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// snapListed is the part of `snapshots ls --format json` these tests read.
type snapListed struct {
	ID      string `json:"id"`
	Service string `json:"service"`
	Trigger string `json:"trigger"`
	Volumes []struct {
		Name   string `json:"volume"`
		Size   int64  `json:"size"`
		Stored int64  `json:"stored"`
		Digest string `json:"digest"`
		Kind   string `json:"kind"`
	} `json:"volumes"`
}

func snapshotsOf(t *testing.T, a *fixture.App) []snapListed {
	t.Helper()
	r := a.Gordon("snapshots", "ls", a.Name, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var out []snapListed
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out), r.Stdout)
	return out
}

// volumeFiles is every regular file under /data of the service's running
// container, by name, read with `docker cp` (the engine's archive API).
func volumeFiles(t *testing.T, app, service string) map[string][]byte {
	t.Helper()
	ids := fixture.Running(app, service)
	require.Len(t, ids, 1, "one running container of %s/%s", app, service)
	out, err := exec.Command("docker", "cp", ids[0]+":/data", "-").Output()
	require.NoError(t, err)
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[h.Name] = b
		}
	}
	require.NotEmpty(t, files)
	return files
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// Data you can copy off the machine (docs/data.md): `snapshots create`
// takes a snapshot of a serving service, `export` writes it as one file,
// and after the data changed and the snapshot was removed, `import` of
// that file and `restore` bring back every file of the volume byte for
// byte.
func TestSnapshots_ExportImportRestoreRoundTripsTheVolumeByteForByte(t *testing.T) {
	kv := testimages.Require(t, "v1", "kv")["kv"]
	const host = "snaprt.test"
	a := fixture.NewApp(t, "e2esnaprt")
	a.MustDeploy(kvManifest(a.Name, kv, host))
	big := randomHex(t, 256<<10)
	require.NoError(t, a.Edge.Put(host, "/k/greeting", "before"))
	require.NoError(t, a.Edge.Put(host, "/k/big", big))
	want := volumeFiles(t, a.Name, "kv")

	r := a.Gordon("snapshots", "create", a.Name)
	require.Equal(t, 0, r.Code, r.String())
	taken := snapshotsOf(t, a)
	require.Len(t, taken, 1)
	require.Equal(t, "manual", taken[0].Trigger)
	require.Equal(t, "kv", taken[0].Service)
	require.Equal(t, "before", getKV(t, a, host, "greeting"), "the service serves again after create")

	file := filepath.Join(t.TempDir(), "snap.gordon")
	r = a.Gordon("snapshots", "export", a.Name, taken[0].ID)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.NoError(t, os.WriteFile(file, []byte(r.Stdout), 0o600))
	t.Logf("snapshot %s: %d volume(s), tar %d bytes, stored %d bytes; export file %d bytes",
		taken[0].ID, len(taken[0].Volumes), taken[0].Volumes[0].Size, taken[0].Volumes[0].Stored, len(r.Stdout))

	require.NoError(t, a.Edge.Put(host, "/k/greeting", "after"))
	require.NoError(t, a.Edge.Put(host, "/k/big", "gone"))
	r = a.Gordon("snapshots", "rm", a.Name, taken[0].ID)
	require.Equal(t, 0, r.Code, r.String())
	require.Empty(t, snapshotsOf(t, a))

	r = a.Gordon("snapshots", "import", a.Name, file)
	require.Equal(t, 0, r.Code, r.String())
	imported := snapshotsOf(t, a)
	require.Len(t, imported, 1)
	require.Equal(t, "import", imported[0].Trigger)
	require.Equal(t, taken[0].Volumes[0].Digest, imported[0].Volumes[0].Digest, "the imported volume is the exported one")

	r = a.Gordon("snapshots", "restore", a.Name, imported[0].ID)
	require.Equal(t, 0, r.Code, r.String())
	assert.Equal(t, want, volumeFiles(t, a.Name, "kv"), "every file of the volume, byte for byte")
	assert.Equal(t, "before", getKV(t, a, host, "greeting"))
	assert.Equal(t, big, getKV(t, a, host, "big"))
}

// A kill -9 of the CLI while it writes a snapshot (the old generation
// stopped, the edge holding its requests), then `reconcile`, converges:
// the old or the new generation serves the data it had, the latest op is
// terminal, no partial snapshot is listed and none is left on disk.
func TestSnapshots_KillDuringASnapshotConvergesWithNoPartialSnapshot(t *testing.T) {
	imgs := testimages.Require(t, "v1", "kv")
	k2 := testimages.Require(t, "v2", "kv")["kv"]
	const host = "snapkill.test"
	a := fixture.NewApp(t, "e2esnapkill")
	a.MustDeploy(kvManifest(a.Name, imgs["kv"], host))
	require.NoError(t, a.Edge.Put(host, "/k/greeting", "kept"))
	// Incompressible data, so the snapshot takes long enough to be caught.
	blob := filepath.Join(t.TempDir(), "blob.bin")
	f, err := os.Create(blob)
	require.NoError(t, err)
	_, err = io.CopyN(f, rand.Reader, 192<<20)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	ids := fixture.Running(a.Name, "kv")
	require.Len(t, ids, 1)
	out, err := exec.Command("docker", "cp", blob, ids[0]+":/data/blob.bin").CombinedOutput()
	require.NoError(t, err, string(out))

	l := fixture.StartLoad(t, "http://"+a.Edge.HTTPAddr+"/k/greeting", host, 2, nil)
	a.Write(kvManifest(a.Name, k2, host))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, so, se := fixture.Command(ctx, fixture.NormalBin(), a.State, nil, "deploy", "-f", a.File)
	t0 := time.Now()
	require.NoError(t, cmd.Start())
	dir := filepath.Join(a.State, "snapshots", a.Name)
	partial := ""
	require.Eventually(t, func() bool {
		partial = partialSnapshot(dir)
		return partial != ""
	}, time.Minute, 5*time.Millisecond, "a snapshot being written")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	res := fixture.Finish(cmd.Wait(), so, se, t0)
	require.True(t, res.Killed, "the deploy was killed during the snapshot: %s", res.String())
	t.Logf("deploy killed after %s while it wrote snapshot %s", res.Elapsed.Round(time.Millisecond), partial)
	require.NotEmpty(t, partialSnapshot(dir), "the kill left a partial snapshot")

	rec := fixture.RunCLI(t, fixture.NormalBin(), a.State, nil, "reconcile", a.Name)
	require.Equal(t, 0, rec.Code, rec.String())
	assert.Equal(t, "kept", getKV(t, a, host, "greeting"), "the old or the new generation serves the data")
	st := l.Stop()
	t.Logf("load from before the deploy to after reconcile: %s", st)
	assert.Zero(t, st.Failed(), "failed requests: %v", st.Errors)
	assert.NotEmpty(t, latestOpJSON(t, a.State, a.Name).Outcome, "the latest op is terminal")
	assert.Empty(t, snapshotsOf(t, a), "no partial snapshot is listed")
	entries, _ := os.ReadDir(dir)
	assert.Empty(t, entries, "reconcile removed the partial snapshot")
}

// partialSnapshot is the id of a snapshot under dir being written (a file
// in it, no manifest yet), "" when none.
func partialSnapshot(dir string) string {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		files, _ := os.ReadDir(filepath.Join(dir, e.Name()))
		if len(files) == 0 {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "manifest.json")); errors.Is(err, os.ErrNotExist) {
			for _, f := range files {
				if strings.HasPrefix(f.Name(), ".") {
					return e.Name()
				}
			}
		}
	}
	return ""
}
