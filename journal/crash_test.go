package journal

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestR5_AtomicWriteSurvivesKill9 kills a writer that rewrites one record in
// a tight loop (A/B) with SIGKILL at random moments, many times, and after
// every kill reads the record in a fresh Store: always exactly A or B, never
// torn, never an error (decision 1). Leftover temp files are then removed
// by Recover and never mistaken for records.
func TestR5_AtomicWriteSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	a, b := crashRecord("A"), crashRecord("B")
	ctx := context.Background()
	seed, err := Open(dir)
	require.NoError(t, err)
	require.NoError(t, seed.SaveActive(ctx, a))
	deadline := time.Now().Add(10 * time.Second)
	seen := map[string]int{}
	iterations, midWrite := 0, 0
	// Up to 200 kills within ~10 s; on a slow machine at least 10 anyway.
	for ; iterations < 200 && (time.Now().Before(deadline) || iterations < 10); iterations++ {
		h := startHelper(t, "writer", dir)
		h.expect(t, "ready", 10*time.Second)
		// A random point of the writer's work to kill it at: the delay is
		// the test's input, not a wait.
		time.Sleep(time.Duration(rand.IntN(20000)) * time.Microsecond)
		h.kill9(t)

		s, err := Open(dir, WithTempGrace(0))
		require.NoError(t, err)
		got, err := s.LoadActive(ctx, "blog")
		require.NoError(t, err, "iteration %d", iterations)
		switch got.ConvergedRevision {
		case "rev-A":
			require.Equal(t, a, got, "iteration %d", iterations)
		case "rev-B":
			require.Equal(t, b, got, "iteration %d", iterations)
		default:
			t.Fatalf("iteration %d: record is neither A nor B: %q", iterations, got.ConvergedRevision)
		}
		seen[got.ConvergedRevision]++

		midWrite += countTemp(t, dir)
		require.NoError(t, s.Recover(ctx))
		require.Zero(t, countTemp(t, dir), "Recover left temp files")
	}
	t.Logf("%d kills, %d of them mid-write (temp file left); final reads: %v", iterations, midWrite, seen)
}

// TestR12_RecoverRemovesOnlyStaleTempFiles: Recover removes renameio temp
// files older than the grace, keeps fresh ones (a concurrent writer of
// another app may own them), skips plugins/, and never touches records.
func TestR12_RecoverRemovesOnlyStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, WithTempGrace(time.Minute))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.SaveActive(ctx, core.Active{App: "blog"}))

	stale := filepath.Join(dir, "apps", "blog", ".active.json12345")
	fresh := filepath.Join(dir, "apps", "blog", ".active.json67890")
	staleSecret := filepath.Join(dir, "secrets", "inc", "web", ".token42")
	plugin := filepath.Join(dir, "plugins", ".gordon-probe-x1")
	for _, p := range []string{stale, fresh, staleSecret, plugin} {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte("{partial"), 0o600))
	}
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{stale, staleSecret, plugin} {
		require.NoError(t, os.Chtimes(p, old, old))
	}

	require.NoError(t, s.Recover(ctx))
	require.NoFileExists(t, stale)
	require.NoFileExists(t, staleSecret)
	require.FileExists(t, fresh, "a temp file younger than the grace may be a live writer's")
	require.FileExists(t, plugin, "plugins/ is not the journal's")
	got, err := s.LoadActive(ctx, "blog")
	require.NoError(t, err)
	require.Equal(t, "blog", got.App)
}

// countTemp counts temporary files left in apps/blog.
func countTemp(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "apps", "blog"))
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}
