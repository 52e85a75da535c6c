package edgestate

import (
	"os"
	"path/filepath"

	"github.com/google/renameio/v2/maybe"
)

// WriteFileAtomic replaces path with data (mode 0644) so that a reader sees
// the old or the new content, never a mix: temp file, fsync, rename, then
// an fsync of the directory so the rename survives a crash. The edge writes
// status.json and applied.json with it, traffic/edge writes routes.json.
func WriteFileAtomic(path string, data []byte) error {
	if err := maybe.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
