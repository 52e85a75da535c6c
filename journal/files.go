package journal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Project files (SPEC R82): files/<app>/<name>, name the file's
// content-addressed core.ConfigFile.StoreName. A stored file is never
// rewritten: the same name is the same bytes and mode, so containers of
// every generation bind-mount one copy read-only.

// filePath is files/<app>/<name> after checking both names.
func (s *Store) filePath(app, name string) (string, error) {
	if err := validNames("app", app, "file", name); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, "files", app, name), nil
}

// PutFile stores data as files/<app>/<name> with the permission bits of
// mode (read-only bits only: write bits are dropped) unless it exists,
// and returns its absolute host path.
func (s *Store) PutFile(_ context.Context, app, name string, data []byte, mode uint32) (string, error) {
	p, err := s.filePath(app, name)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(p); err == nil && st.Size() == int64(len(data)) {
		return p, nil
	}
	dir := filepath.Dir(p)
	if err := ensureDir(dir); err != nil {
		return "", err
	}
	perm := os.FileMode(mode).Perm() &^ 0o222
	pf, err := renameio.NewPendingFile(p, renameio.WithTempDir(dir), renameio.WithStaticPermissions(perm))
	if err != nil {
		return "", fmt.Errorf("journal: app %s: store file %s: %w", app, name, err)
	}
	defer pf.Cleanup() //nolint:errcheck // no-op after a successful replace
	if _, err := pf.Write(data); err != nil {
		return "", fmt.Errorf("journal: app %s: store file %s: %w", app, name, err)
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return "", fmt.Errorf("journal: app %s: store file %s: %w", app, name, err)
	}
	return p, syncDir(dir)
}

// FilePath returns the host path of files/<app>/<name>; an absent file
// wraps core.ErrNotFound.
func (s *Store) FilePath(_ context.Context, app, name string) (string, error) {
	p, err := s.filePath(app, name)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("app %s: stored file %s: %w", app, name, core.ErrNotFound)
	} else if err != nil {
		return "", fmt.Errorf("journal: app %s: stored file %s: %w", app, name, err)
	}
	return p, nil
}
