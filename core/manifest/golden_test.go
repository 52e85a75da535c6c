package manifest

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

var update = flag.Bool("update", false, "rewrite the golden .json/.err files of testdata/manifest")

// TestManifest_Golden runs every testdata/manifest/*.toml as a subtest and
// compares the result with its golden file: *.json holds the expected
// normalized AppSpec, *.err the expected problems (ManifestError.Error(),
// one per line). Run with -update to regenerate (STYLE "What we take" 11).
func TestManifest_Golden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "manifest", "*.toml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".toml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			base := strings.TrimSuffix(file, ".toml")
			spec, perr := Parse(filepath.Base(file), data)

			var got []byte
			gotExt, staleExt := ".json", ".err"
			if perr != nil {
				var merr *ManifestError
				require.ErrorAs(t, perr, &merr)
				require.ErrorIs(t, perr, core.ErrInvalid)
				require.NotEmpty(t, merr.Problems)
				got = []byte(perr.Error() + "\n")
				gotExt, staleExt = ".err", ".json"
			} else {
				got, err = json.MarshalIndent(spec, "", "  ")
				require.NoError(t, err)
				got = append(got, '\n')
				assertJSONRoundTrip(t, spec)
			}
			if *update {
				require.NoError(t, os.WriteFile(base+gotExt, got, 0o644))
				_ = os.Remove(base + staleExt)
				return
			}
			if _, err := os.Stat(base + staleExt); err == nil {
				t.Fatalf("%s has a golden %s but parsing gave %s:\n%s", file, staleExt, gotExt, got)
			}
			want, err := os.ReadFile(base + gotExt)
			require.NoError(t, err, "missing golden file; run go test -update")
			assert.Equal(t, string(want), string(got))
		})
	}
}

// assertJSONRoundTrip checks that the spec a revision stores (JSON) reads
// back, after Normalize, as the same spec (R15 compares specs).
func assertJSONRoundTrip(t *testing.T, spec core.AppSpec) {
	t.Helper()
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	var back core.AppSpec
	require.NoError(t, json.Unmarshal(b, &back))
	back = Normalize(back)
	// Plugin config values change Go type through JSON (int64 -> float64);
	// compare them as JSON instead.
	for i := range spec.Services {
		a, _ := json.Marshal(spec.Services[i].Readiness.Config)
		c, _ := json.Marshal(back.Services[i].Readiness.Config)
		assert.JSONEq(t, string(a), string(c))
		back.Services[i].Readiness.Config = spec.Services[i].Readiness.Config
	}
	assert.Equal(t, spec, back)
}

// TestManifest_GoldenFilesArePaired fails on a golden file without input.
func TestManifest_GoldenFilesArePaired(t *testing.T) {
	for _, ext := range []string{"*.json", "*.err"} {
		files, err := filepath.Glob(filepath.Join("testdata", "manifest", ext))
		require.NoError(t, err)
		for _, f := range files {
			_, err := os.Stat(strings.TrimSuffix(f, filepath.Ext(f)) + ".toml")
			assert.False(t, errors.Is(err, os.ErrNotExist), "%s has no .toml input", f)
		}
	}
}
