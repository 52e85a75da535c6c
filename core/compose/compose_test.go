package compose

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// testBinds approves /srv/approved as bind "approved".
func testBinds(p string) (string, error) {
	if p == "/srv/approved" {
		return "approved", nil
	}
	return "", errors.New("the host path is not approved for binds")
}

func load(t *testing.T, dir string, files ...string) (*Result, error) {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join(dir, f))
	}
	return Load(context.Background(), Options{Files: paths, Environ: []string{}, BindName: testBinds})
}

// golden compares got with testdata/<dir>/<name>, or rewrites it.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test -update")
	require.Equal(t, string(want), got)
}

func TestCompose_ShopConverts(t *testing.T) {
	res, err := load(t, "testdata/shop", "compose.yaml")
	require.NoError(t, err)
	golden(t, "testdata/shop/manifest.toml", string(res.Manifest))
	t.Log(strings.Join(res.Notes, "\n"))
}
