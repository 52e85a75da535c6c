package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
)

func newTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "state"), WithLockPoll(10*time.Millisecond))
	require.NoError(t, err)
	return s
}

// TestStoreSuite runs the core.Store conformance suite against the file
// journal.
func TestStoreSuite(t *testing.T) {
	coretest.StoreSuite(t, func(t *testing.T) core.Store { return newTestStore(t) })
}

// TestDecision1_LayoutAndModes: records land where ARCHITECTURE §3 says,
// files 0600, directories 0700, indented JSON, VERSION 1.
func TestDecision1_LayoutAndModes(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	info, err := s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	require.NoError(t, s.SaveActive(ctx, core.Active{App: "blog"}))
	require.NoError(t, s.SaveDesired(ctx, "blog", "rev-1"))
	require.NoError(t, s.SaveRevision(ctx, core.Revision{ID: "rev-1", App: "blog"}))
	_, _, err = s.ClaimOp(ctx, core.Operation{ID: "op-1", App: "blog", Kind: core.OpDeploy})
	require.NoError(t, err)
	require.NoError(t, s.SaveMarker(ctx, core.Marker{App: "blog", Service: "web", Container: "c1"}))
	require.NoError(t, s.RegisterClaims(ctx, []core.Claim{{Port: 18080, Protocol: "tcp", App: "blog", Container: "c1"}}))
	require.NoError(t, s.SetSecret(ctx, "blog", "web", "token", []byte("v")))

	v, err := os.ReadFile(filepath.Join(s.Dir(), "VERSION"))
	require.NoError(t, err)
	assert.Equal(t, "1\n", string(v))
	for _, rel := range []string{
		"apps/blog/app.json", "apps/blog/active.json", "apps/blog/desired.json",
		"apps/blog/revisions/rev-1.json", "apps/blog/ops/op-1.json", "apps/blog/ops/LATEST",
		"apps/blog/markers.json", "claims.json", "secrets/" + info.Incarnation + "/web/token", "VERSION",
	} {
		fi, err := os.Stat(filepath.Join(s.Dir(), rel))
		require.NoError(t, err, rel)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), rel)
	}
	for _, rel := range []string{".", "apps", "apps/blog", "apps/blog/ops", "secrets", "secrets/" + info.Incarnation + "/web"} {
		fi, err := os.Stat(filepath.Join(s.Dir(), rel))
		require.NoError(t, err, rel)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), rel)
	}
	data, err := os.ReadFile(filepath.Join(s.Dir(), "apps/blog/active.json"))
	require.NoError(t, err)
	assert.Contains(t, string(data), "\n  \"app\": \"blog\"", "records are indented JSON")
}

// TestDecision1_CorruptRecordReportedNeverReset: a torn record is a
// *CorruptError naming its path, not ErrNotFound, and the bytes stay.
func TestDecision1_CorruptRecordReportedNeverReset(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	cases := []struct {
		rel  string
		load func() error
	}{
		{"apps/blog/active.json", func() error { _, err := s.LoadActive(ctx, "blog"); return err }},
		{"apps/blog/markers.json", func() error { _, err := s.LoadMarkers(ctx, "blog"); return err }},
		{"apps/blog/intent.json", func() error { _, err := s.LoadIntent(ctx, "blog"); return err }},
		{"apps/blog/recovery.json", func() error { _, err := s.LoadRecovery(ctx, "blog"); return err }},
		{"apps/blog/ops/op-1.json", func() error { _, err := s.LoadOp(ctx, "blog", "op-1"); return err }},
		{"apps/blog/app.json", func() error { _, err := s.EnsureApp(ctx, "blog"); return err }},
		{"claims.json", func() error { return s.RegisterClaims(ctx, []core.Claim{{Port: 1, Protocol: "tcp"}}) }},
	}
	for _, tc := range cases {
		t.Run(tc.rel, func(t *testing.T) {
			p := filepath.Join(s.Dir(), tc.rel)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
			torn := []byte(`{"app": "blog", "servi`)
			require.NoError(t, os.WriteFile(p, torn, 0o600))
			err := tc.load()
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, p, ce.Path)
			assert.Contains(t, err.Error(), p)
			assert.NotErrorIs(t, err, core.ErrNotFound)
			after, rerr := os.ReadFile(p)
			require.NoError(t, rerr)
			assert.Equal(t, torn, after, "a corrupt record is never reset")
		})
	}
}

// TestR57_NewerSchemaRefusedNotRewritten: VERSION 2 makes Open and Recover
// fail with ErrConflict and an upgrade hint; VERSION is left as it was.
func TestR57_NewerSchemaRefusedNotRewritten(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	require.NoError(t, err)
	vp := filepath.Join(dir, "VERSION")
	require.NoError(t, os.WriteFile(vp, []byte("2\n"), 0o600))

	err = s.Recover(context.Background())
	require.ErrorIs(t, err, core.ErrConflict)
	_, err = Open(dir)
	require.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), fmt.Sprintf("state directory %s has schema 2; this docker-gordon understands up to 1: upgrade docker-gordon", dir))
	v, rerr := os.ReadFile(vp)
	require.NoError(t, rerr)
	assert.Equal(t, "2\n", string(v))

	require.NoError(t, os.WriteFile(vp, []byte("garbage"), 0o600))
	_, err = Open(dir)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, vp, ce.Path)
}

// TestR6_ClaimOpDuplicateIDIsConflict: an id is claimed once; a keyed
// replay survives a fresh Store (the key index is durable).
func TestR6_ClaimOpDuplicateIDIsConflict(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	op := core.Operation{ID: "op-1", App: "blog", Kind: core.OpDeploy, Key: "k"}
	_, claimed, err := s.ClaimOp(ctx, op)
	require.NoError(t, err)
	require.True(t, claimed)
	_, _, err = s.ClaimOp(ctx, core.Operation{ID: "op-1", App: "blog", Kind: core.OpStop})
	require.ErrorIs(t, err, core.ErrConflict)

	fresh, err := Open(s.Dir())
	require.NoError(t, err)
	stored, claimed, err := fresh.ClaimOp(ctx, core.Operation{ID: "op-2", App: "blog", Kind: core.OpDeploy, Key: "k"})
	require.NoError(t, err)
	assert.False(t, claimed)
	assert.Equal(t, "op-1", stored.ID)
}

// TestR55_EndIncarnationArchivesOwnership: ownership is archived under the
// old incarnation; the old secrets stay on disk (R3).
func TestR55_EndIncarnationArchivesOwnership(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	info, err := s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	o := core.Ownership{App: "blog", Incarnation: info.Incarnation, Volumes: []string{"data"}, Secrets: []string{"token"}}
	require.NoError(t, s.SaveOwnership(ctx, o))
	require.NoError(t, s.SetSecret(ctx, "blog", "web", "token", []byte("v")))
	require.NoError(t, s.EndIncarnation(ctx, "blog"))

	var archived core.Ownership
	require.NoError(t, readJSON(filepath.Join(s.Dir(), "apps/blog/archive", info.Incarnation, "ownership.json"), &archived, '{', "archive"))
	assert.Equal(t, o, archived)
	assert.FileExists(t, filepath.Join(s.Dir(), "secrets", info.Incarnation, "web", "token"))
	require.ErrorIs(t, s.EndIncarnation(ctx, "blog"), core.ErrNotFound)
}

// TestDecision13_ContainerSecretFile: the per-container copy is a 0600 file
// with the value at the returned absolute path, gone after delete.
func TestDecision13_ContainerSecretFile(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	info, err := s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	p, err := s.WriteContainerSecret(ctx, "blog", "c1", "token", []byte("value"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(s.Dir(), "secrets", info.Incarnation, "containers", "c1", "token"), p)
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "value", string(data))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.NoError(t, s.DeleteContainerSecrets(ctx, "blog", "c1"))
	assert.NoDirExists(t, filepath.Dir(p))

	_, err = s.WriteContainerSecret(ctx, "ghost", "c1", "token", []byte("v"))
	require.ErrorIs(t, err, core.ErrNotFound)
}

// TestClaimsConcurrentWritersLoseNothing: several Stores (as several app
// writers would) register claims concurrently; claims.lock keeps every one.
func TestClaimsConcurrentWritersLoseNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	ctx := context.Background()
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		s, err := Open(dir, WithLockPoll(time.Millisecond))
		require.NoError(t, err)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				errs <- s.RegisterClaims(ctx, []core.Claim{{Port: 20000 + w*100 + i, Protocol: "tcp", App: fmt.Sprintf("app%d", w), Container: "c"}})
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	s, err := Open(dir)
	require.NoError(t, err)
	cs, err := s.ListClaims(ctx)
	require.NoError(t, err)
	assert.Len(t, cs, writers*each)
}

// TestDefaultDir follows ARCHITECTURE §3.
func TestDefaultDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	home := func() (string, error) { return "/home/u", nil }
	noHome := func() (string, error) { return "", errors.New("no home") }
	cases := []struct {
		name string
		env  map[string]string
		euid int
		home func() (string, error)
		want string
	}{
		{"env wins over root", map[string]string{"GORDON_STATE_DIR": "/srv/g"}, 0, home, "/srv/g"},
		{"root", nil, 0, home, "/var/lib/docker-gordon"},
		{"xdg", map[string]string{"XDG_STATE_HOME": "/x"}, 1000, home, "/x/docker-gordon"},
		{"relative xdg ignored", map[string]string{"XDG_STATE_HOME": "rel"}, 1000, home, "/home/u/.local/state/docker-gordon"},
		{"home", nil, 1000, home, "/home/u/.local/state/docker-gordon"},
	}
	for _, tc := range cases {
		got, err := defaultDir(env(tc.env), tc.euid, tc.home)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
	_, err := defaultDir(env(nil), 1000, noHome)
	require.ErrorIs(t, err, core.ErrInvalid)
}

// TestR6_ClaimInterruptedBeforeKeyIndexClaimsAnew: a claim that crashed
// after the op file (and LATEST) but before its key index, or a key index
// naming an op that was never written, does not capture a replay: the
// replay claims a new op and becomes latest.
func TestR6_ClaimInterruptedBeforeKeyIndexClaimsAnew(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	// Crash window 1: op-1 and LATEST written, key index missing.
	require.NoError(t, writeJSON(filepath.Join(s.Dir(), "apps/blog/ops/op-1.json"), core.Operation{ID: "op-1", App: "blog", Kind: core.OpDeploy, Key: "k1"}))
	require.NoError(t, writeFileAtomic(filepath.Join(s.Dir(), "apps/blog/ops/LATEST"), []byte("op-1\n")))
	stored, claimed, err := s.ClaimOp(ctx, core.Operation{ID: "op-2", App: "blog", Kind: core.OpDeploy, Key: "k1"})
	require.NoError(t, err)
	assert.True(t, claimed)
	assert.Equal(t, "op-2", stored.ID)
	latest, err := s.LatestOp(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, "op-2", latest.ID)

	// Dangling key index (names an op file that does not exist).
	require.NoError(t, writeJSON(s.keyPath("blog", "k2"), keyRecord{Op: "op-ghost"}))
	stored, claimed, err = s.ClaimOp(ctx, core.Operation{ID: "op-3", App: "blog", Kind: core.OpStop, Key: "k2"})
	require.NoError(t, err)
	assert.True(t, claimed)
	assert.Equal(t, "op-3", stored.ID)
	// And now the key is durable.
	stored, claimed, err = s.ClaimOp(ctx, core.Operation{ID: "op-4", App: "blog", Kind: core.OpStop, Key: "k2"})
	require.NoError(t, err)
	assert.False(t, claimed)
	assert.Equal(t, "op-3", stored.ID)
}

// TestR6_LatestNamingMissingOpIsCorrupt: LATEST naming an absent op is
// reported with its path, not as "no latest op".
func TestR6_LatestNamingMissingOpIsCorrupt(t *testing.T) {
	s := newTestStore(t)
	p := filepath.Join(s.Dir(), "apps/blog/ops/LATEST")
	require.NoError(t, writeFileAtomic(p, []byte("op-ghost\n")))
	_, err := s.LatestOp(context.Background(), "blog")
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, p, ce.Path)
	assert.NotErrorIs(t, err, core.ErrNotFound)
}

// TestR57_ListAppsOnlyLiveIncarnations: a directory created by a lock or
// left with history after R55 is not a listed app.
func TestR57_ListAppsOnlyLiveIncarnations(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	l, err := s.Lock(ctx, "locked-only", core.LockHolder{Verb: "deploy"})
	require.NoError(t, err)
	require.NoError(t, l.Unlock())
	_, err = s.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	_, err = s.EnsureApp(ctx, "gone")
	require.NoError(t, err)
	require.NoError(t, s.EndIncarnation(ctx, "gone"))
	apps, err := s.ListApps(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"blog"}, apps)
}
