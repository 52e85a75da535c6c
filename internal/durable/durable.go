// Package durable writes files that must survive a crash: the data is
// fsynced, renamed over the old file, and the directory is fsynced, so
// the rename itself is on disk (renameio alone stops before the last step).
package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/renameio/v2"
)

// WriteFile writes data to path atomically with mode perm (a reader sees
// the old or the new content), then fsyncs path's directory.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := renameio.WriteFile(path, data, perm); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs directory dir, so that a create, rename or remove in it
// is durable. A file system that cannot fsync a directory (EINVAL) is
// taken as done.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
