package journal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gordon-deploy/docker-gordon/core"
)

// ArchivedOwnership returns the ownership records EndIncarnation archived
// for app (apps/<app>/archive/<incarnation>/ownership.json), one per ended
// incarnation, sorted by incarnation id; none when the app never ended one
// here. A record that cannot be read is an error naming its path.
func (s *Store) ArchivedOwnership(ctx context.Context, app string) ([]core.Ownership, error) {
	if err := validName("app", app); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.appDir(app), "archive")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", dir, err)
	}
	var out []core.Ownership
	for _, ent := range ents {
		if !ent.IsDir() {
			continue
		}
		var o core.Ownership
		p := filepath.Join(dir, ent.Name(), "ownership.json")
		if err := readJSON(p, &o, '{', "app "+app+" archived ownership"); err != nil {
			if errors.Is(err, core.ErrNotFound) {
				continue
			}
			return nil, err
		}
		if o.Incarnation == "" {
			o.Incarnation = ent.Name()
		}
		out = append(out, o)
	}
	return out, nil
}

// ArchivedApps returns, sorted, the apps with at least one ended
// incarnation archived here (apps/<app>/archive/), current or not.
func (s *Store) ArchivedApps(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(s.appsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: list apps: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || validName("app", e.Name()) != nil {
			continue
		}
		if st, err := os.Stat(filepath.Join(s.appDir(e.Name()), "archive")); err == nil && st.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
