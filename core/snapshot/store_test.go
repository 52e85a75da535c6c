package snapshot

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func take(t *testing.T, s *Store, app, service, trigger string, data map[string][]byte) Manifest {
	t.Helper()
	w, err := s.Begin(Manifest{ID: s.NewID(service), App: app, Service: service, Trigger: trigger, CreatedAt: s.now()})
	require.NoError(t, err)
	for name, b := range data {
		_, err := w.AddVolume(name, "/data", func(out io.Writer) error { _, err := out.Write(b); return err })
		require.NoError(t, err)
	}
	m, err := w.Commit(w.Manifest())
	require.NoError(t, err)
	return m
}

func readAll(t *testing.T, s *Store, app, id, vol string) []byte {
	t.Helper()
	r, _, err := s.OpenVolume(app, id, vol)
	require.NoError(t, err)
	defer r.Close()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return b
}

// A snapshot round-trips its volumes byte for byte, records sizes and
// digests, and is compressed.
func TestSnapshot_RoundTripsAndRecordsSizeAndDigest(t *testing.T) {
	s := Open(t.TempDir())
	data := bytes.Repeat([]byte("gordon "), 100_000)
	m := take(t, s, "blog", "db", TriggerDeploy, map[string][]byte{"blog_db": data})
	require.Len(t, m.Volumes, 1)
	v := m.Volumes[0]
	assert.Equal(t, int64(len(data)), v.Size)
	assert.Less(t, v.Stored, v.Size/10, "zstd compresses repetitive data")
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, v.Digest)
	assert.Equal(t, data, readAll(t, s, "blog", m.ID, "blog_db"))
	list, err := s.List("blog")
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, m.ID, list[0].ID)
}

// A damaged snapshot is refused when read, never restored short, and
// never exported.
func TestSnapshot_DamagedFileFailsItsDigest(t *testing.T) {
	dir := t.TempDir()
	s := Open(dir)
	m := take(t, s, "blog", "db", TriggerDeploy, map[string][]byte{"v": []byte("one")})
	other := take(t, s, "blog", "db", TriggerDeploy, map[string][]byte{"v": []byte("two")})
	src := filepath.Join(dir, "snapshots", "blog", other.ID, "v.tar.zst")
	dst := filepath.Join(dir, "snapshots", "blog", m.ID, "v.tar.zst")
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, b, 0o600))
	r, _, err := s.OpenVolume("blog", m.ID, "v")
	require.NoError(t, err)
	_, err = io.ReadAll(r)
	assert.ErrorContains(t, err, "is damaged")

	var out bytes.Buffer
	err = s.Export("blog", m.ID, &out)
	assert.ErrorContains(t, err, "is damaged", "a damaged snapshot is not exported as if it were whole")
	assert.Zero(t, out.Len(), "nothing is written")
}

// A snapshot without its manifest (a crash while it was taken) is never
// listed, and Sweep removes it.
func TestSnapshot_PartialIsNotListedAndIsSwept(t *testing.T) {
	s := Open(t.TempDir())
	w, err := s.Begin(Manifest{ID: s.NewID("db"), App: "blog", Service: "db", Trigger: TriggerDeploy})
	require.NoError(t, err)
	_, err = w.AddVolume("v", "/data", func(out io.Writer) error { _, err := out.Write([]byte("x")); return err })
	require.NoError(t, err)
	list, err := s.List("blog")
	require.NoError(t, err)
	assert.Empty(t, list)
	swept, err := s.Sweep("blog")
	require.NoError(t, err)
	assert.Equal(t, []string{w.Manifest().ID}, swept)
	_, err = s.Get("blog", w.Manifest().ID)
	assert.ErrorIs(t, err, core.ErrNotFound)
}

// Retention by keep counts one (service, trigger) and removes the oldest.
func TestSnapshot_RetainKeepsTheNewestPerServiceAndTrigger(t *testing.T) {
	s := Open(t.TempDir())
	base := time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 4 {
		s.now = func() time.Time { return base.Add(time.Duration(i) * time.Minute) }
		ids = append(ids, take(t, s, "blog", "db", TriggerBackup, map[string][]byte{"v": {byte(i)}}).ID)
	}
	manual := take(t, s, "blog", "db", TriggerManual, map[string][]byte{"v": {9}})
	removed, err := s.Retain("blog", "db", TriggerBackup, 2)
	require.NoError(t, err)
	assert.Equal(t, ids[:2], removed)
	list, err := s.List("blog")
	require.NoError(t, err)
	var got []string
	for _, m := range list {
		got = append(got, m.ID)
	}
	assert.ElementsMatch(t, []string{ids[2], ids[3], manual.ID}, got)
}

// Export then import round-trips a snapshot into another app byte for
// byte; an import of something else changes nothing.
func TestSnapshot_ExportImportRoundTrip(t *testing.T) {
	s := Open(t.TempDir())
	data := bytes.Repeat([]byte{1, 2, 3, 4}, 50_000)
	m := take(t, s, "blog", "db", TriggerDeploy, map[string][]byte{"blog_db": data})
	var buf bytes.Buffer
	require.NoError(t, s.Export("blog", m.ID, &buf))
	got, err := s.Import("copy", bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, TriggerImport, got.Trigger)
	assert.Equal(t, m.Volumes[0].Digest, got.Volumes[0].Digest)
	assert.Equal(t, data, readAll(t, s, "copy", m.ID, "blog_db"))

	_, err = s.Import("other", bytes.NewReader([]byte("not a tar")))
	assert.ErrorIs(t, err, core.ErrInvalid)
	list, err := s.List("other")
	require.NoError(t, err)
	assert.Empty(t, list)
	_, err = s.Import("copy", bytes.NewReader(buf.Bytes()))
	assert.ErrorIs(t, err, core.ErrConflict, "an id the app has already")
}

// An online dump is stored as one entry of kind dump (dump.zst), read
// back byte for byte, and survives an export and import as a dump.
func TestSnapshot_DumpRoundTripsThroughExportAndImport(t *testing.T) {
	s := Open(t.TempDir())
	dump := []byte("-- PostgreSQL database cluster dump\n\x00binary\xff\nCREATE TABLE t (x int);\n")
	w, err := s.Begin(Manifest{ID: s.NewID("db"), App: "blog", Service: "db", Trigger: TriggerBackup, Command: []string{"pg_dumpall", "-U", "postgres"}, CreatedAt: s.now()})
	require.NoError(t, err)
	v, err := w.AddDump(func(out io.Writer) error { _, err := out.Write(dump); return err })
	require.NoError(t, err)
	assert.Equal(t, Volume{Name: "dump", Kind: KindDump, Size: int64(len(dump)), Stored: v.Stored, Digest: v.Digest}, v)
	m, err := w.Commit(w.Manifest())
	require.NoError(t, err)
	assert.True(t, m.IsDump())
	assert.FileExists(t, filepath.Join(s.appDir("blog"), m.ID, "dump.zst"))
	assert.Equal(t, dump, readAll(t, s, "blog", m.ID, "dump"))
	var raw bytes.Buffer
	require.NoError(t, s.WriteDump("blog", m.ID, &raw))
	assert.Equal(t, dump, raw.Bytes(), "export --dump writes the command's output itself")
	vols := take(t, s, "blog", "db", TriggerManual, map[string][]byte{"blog_db": []byte("files")})
	assert.ErrorIs(t, s.WriteDump("blog", vols.ID, &raw), core.ErrInvalid, "a copy of volumes is no dump")

	var buf bytes.Buffer
	require.NoError(t, s.Export("blog", m.ID, &buf))
	got, err := s.Import("copy", bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.True(t, got.IsDump())
	assert.Equal(t, []string{"pg_dumpall", "-U", "postgres"}, got.Command)
	assert.Equal(t, dump, readAll(t, s, "copy", m.ID, "dump"))
}

// An app name that is not one component of the store is refused by every
// entry point: nothing is read, written or removed outside it.
func TestSnapshot_AnAppNameNeverLeavesTheStore(t *testing.T) {
	dir := t.TempDir()
	s := Open(filepath.Join(dir, "state"))
	outside := filepath.Join(dir, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "s1"), 0o700))
	for _, app := range []string{"../../outside", "..", ".", "", "a/b", "../state/snapshots/x"} {
		_, err := s.List(app)
		assert.ErrorIs(t, err, core.ErrInvalid, "List %q", app)
		_, err = s.Get(app, "s1")
		assert.ErrorIs(t, err, core.ErrInvalid, "Get %q", app)
		assert.ErrorIs(t, s.Remove(app, "s1"), core.ErrInvalid, "Remove %q", app)
		_, err = s.Partial(app)
		assert.ErrorIs(t, err, core.ErrInvalid, "Partial %q", app)
		_, err = s.Sweep(app)
		assert.ErrorIs(t, err, core.ErrInvalid, "Sweep %q", app)
		_, err = s.Begin(Manifest{ID: "s2", App: app})
		assert.ErrorIs(t, err, core.ErrInvalid, "Begin %q", app)
		_, err = s.Import(app, strings.NewReader(""))
		assert.ErrorIs(t, err, core.ErrInvalid, "Import %q", app)
	}
	_, err := os.Stat(filepath.Join(outside, "s1"))
	assert.NoError(t, err, "nothing outside the store was removed")
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing was written outside the store")
}
