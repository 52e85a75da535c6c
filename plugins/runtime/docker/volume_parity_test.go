package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/volxfer"
)

// A snapshot taken on a swarm (the volume helper's volxfer.WriteTar, run
// on the node's volume directory) holds what this runtime's ExportVolume
// takes through the engine's archive API, entry for entry and field for
// field, so snapshots of either restore with either: a tree with a
// directory, files with odd modes (setuid, setgid, sticky) and owners, a
// sub-second mtime, a symlink with its own owner, a hardlink and a name
// longer than 100 bytes. Two things differ by engine version, not by
// runtime, and are left out of the comparison: Docker before 23 adds the
// file-type bits to the mode (moby#44083 removed them) and the owner's
// names its host's user database has; from 23 on the tars are the same
// bytes (logged).
func TestVolumeArchive_SwarmHelperTarIsTheEngineArchive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: writes into the engine's volume directory")
	}
	f := newFixture(t)
	ctx := ctxT(t, 60*time.Second)
	vol := f.name("parity")
	require.NoError(t, f.r.EnsureVolume(ctx, core.VolumeSpec{Name: vol, Labels: f.labels()}))
	vi, err := f.r.Client().VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
	require.NoError(t, err)
	dir := vi.Volume.Mountpoint
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("the engine's volumes are not on this machine's disk: %v", err)
	}
	oddTree(t, dir)
	id, err := f.r.CreateContainer(ctx, core.ContainerSpec{Name: f.name("parity"), Image: f.images["kv"], Labels: f.labels(core.LabelService, "db"),
		Mounts: []core.Mount{{Type: core.MountVolume, Source: vol, Target: "/data"}}})
	require.NoError(t, err)
	var engine, helper bytes.Buffer
	require.NoError(t, f.r.ExportVolume(ctx, id, "/data", &engine))
	require.NoError(t, volxfer.WriteTar(dir, &helper))
	assert.Equal(t, tarListing(t, engine.Bytes()), tarListing(t, helper.Bytes()))
	info, err := f.r.Info(ctx)
	require.NoError(t, err)
	t.Logf("engine %s: the same bytes: %v (%d and %d bytes)", info.Version, bytes.Equal(engine.Bytes(), helper.Bytes()), engine.Len(), helper.Len())
}

func oddTree(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) { t.Helper(); require.NoError(t, err) }
	at := time.Date(2024, 3, 4, 5, 6, 7, 250_000_000, time.UTC)
	long := strings.Repeat("n", 120)
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o750))
	must(os.WriteFile(filepath.Join(dir, "sub", "file"), []byte("hello volume"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "sub", long), bytes.Repeat([]byte("x"), 70_000), 0o600))
	must(os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600))
	must(os.Link(filepath.Join(dir, "sub", "file"), filepath.Join(dir, "hard")))
	must(os.Symlink("sub/file", filepath.Join(dir, "link")))
	must(os.Chown(filepath.Join(dir, "sub"), 1234, 5678))
	must(os.Chown(filepath.Join(dir, "sub", "file"), 999, 70))
	must(os.Lchown(filepath.Join(dir, "link"), 7, 8))
	must(os.Chmod(filepath.Join(dir, "sub", "file"), 0o751|os.ModeSetuid))
	must(os.Chmod(filepath.Join(dir, "sub"), 0o750|os.ModeSetgid|os.ModeSticky))
	for _, p := range []string{"sub/file", "empty", "sub/" + long, "sub"} {
		must(os.Chtimes(filepath.Join(dir, p), at, at))
	}
}

// tarListing is one line per entry: every header field but the owner's
// names, the mode's permission bits only, and the body's length.
func tarListing(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		n, err := io.Copy(io.Discard, tr)
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%q type=%c link=%q mode=%o uid=%d gid=%d size=%d body=%d mtime=%s atime=%s ctime=%s dev=%d,%d pax=%v format=%v",
			h.Name, h.Typeflag, h.Linkname, h.Mode&0o7777, h.Uid, h.Gid, h.Size, n, h.ModTime.UTC().Format(time.RFC3339Nano),
			h.AccessTime, h.ChangeTime, h.Devmajor, h.Devminor, h.PAXRecords, h.Format))
	}
}
