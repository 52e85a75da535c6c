package compose

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCompose_Corpus: compose files in the shapes public projects use
// either convert (golden manifest.toml) or are refused with reasons
// (golden errors.txt, each line file:line); none is half-applied: a refused
// project returns no manifest at all.
func TestCompose_Corpus(t *testing.T) {
	dirs, err := filepath.Glob("testdata/corpus/*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			res, err := load(t, dir, "compose.yaml")
			var cerr *Error
			switch {
			case err == nil:
				golden(t, filepath.Join(dir, "manifest.toml"), string(res.Manifest))
				_, statErr := os.Stat(filepath.Join(dir, "errors.txt"))
				require.True(t, os.IsNotExist(statErr), "converted, but errors.txt expects a refusal")
			case errors.As(err, &cerr):
				require.Nil(t, res, "a refused project yields nothing")
				for _, p := range cerr.Problems {
					require.NotZero(t, p.Line, "every refusal names its line: %s", p)
				}
				golden(t, filepath.Join(dir, "errors.txt"), err.Error()+"\n")
				_, statErr := os.Stat(filepath.Join(dir, "manifest.toml"))
				require.True(t, os.IsNotExist(statErr), "refused, but manifest.toml expects a conversion")
			default:
				t.Fatalf("load: %v", err)
			}
		})
	}
}
