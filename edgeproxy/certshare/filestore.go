package certshare

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"
)

// KeyInfo is what Stat tells about a key (certmagic.KeyInfo's fields):
// its key, modification time, size in bytes (of a file) and whether it
// is a file (IsTerminal) rather than a directory.
type KeyInfo struct {
	Key        string    `json:"key"`
	Modified   time.Time `json:"modified"`
	Size       int64     `json:"size"`
	IsTerminal bool      `json:"terminal"`
}

// fileStore is the acme/ subtree with certmagic.FileStorage's semantics
// (re-implemented so the server, which runs in the CLI, links no
// certmagic): a key is a file under dir, directories 0700, files 0600
// written atomically; Delete removes a directory with everything under
// it and is nil for a missing key; Load, Stat and List of a missing key
// return errors wrapping fs.ErrNotExist.
type fileStore struct{ dir string }

func (s fileStore) filename(key string) string {
	return filepath.Join(s.dir, filepath.FromSlash(key))
}

func (s fileStore) store(key string, value []byte) error {
	name := s.filename(key)
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return err
	}
	return writeFileAtomic(name, value)
}

func (s fileStore) load(key string) ([]byte, error) { return os.ReadFile(s.filename(key)) }

func (s fileStore) delete(key string) error { return os.RemoveAll(s.filename(key)) }

func (s fileStore) stat(key string) (KeyInfo, error) {
	fi, err := os.Stat(s.filename(key))
	if err != nil {
		return KeyInfo{}, err
	}
	return KeyInfo{Key: key, Modified: fi.ModTime(), Size: fi.Size(), IsTerminal: !fi.IsDir()}, nil
}

// list returns the keys under prefix: its direct entries, or (recursive)
// every file and directory below it.
func (s fileStore) list(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	var keys []string
	walkPrefix := s.filename(prefix)
	err := filepath.Walk(walkPrefix, func(fpath string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fpath == walkPrefix {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(walkPrefix, fpath)
		if err != nil {
			return fmt.Errorf("%s: %w", fpath, err)
		}
		keys = append(keys, path.Join(prefix, filepath.ToSlash(rel)))
		if !recursive && info.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	return keys, err
}
