package journal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/retention"
)

// Prune implements core.Store: it removes apps/<app>/ops/<id>.json (and the
// op's key index entry) for the ops, and apps/<app>/revisions/<id>.json
// for the revisions, that retention.Select chooses, then fsyncs each
// directory once. When the app has no more ops than keepOps and no more
// revisions than keepRevisions it reads nothing but the two directory
// listings. Callers hold the app lock.
func (s *Store) Prune(ctx context.Context, app string, keepOps, keepRevisions int) (ops, revisions []string, err error) {
	if err := validName("app", app); err != nil {
		return nil, nil, err
	}
	nOps, err := countJSON(s.opsDir(app))
	if err != nil {
		return nil, nil, err
	}
	nRevs, err := countJSON(s.revDir(app))
	if err != nil {
		return nil, nil, err
	}
	if (keepOps <= 0 || nOps <= keepOps) && (keepRevisions <= 0 || nRevs <= keepRevisions) {
		return nil, nil, nil
	}
	all, err := s.ListOps(ctx, app)
	if err != nil {
		return nil, nil, err
	}
	revs, err := s.ListRevisions(ctx, app)
	if err != nil {
		return nil, nil, err
	}
	latest := ""
	if op, err := s.LatestOp(ctx, app); err == nil {
		latest = op.ID
	}
	desired, err := s.LoadDesired(ctx, app)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, nil, err
	}
	active, err := s.LoadActive(ctx, app)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, nil, err
	}
	ops, revisions = retention.Select(all, revs, latest, desired, active, keepOps, keepRevisions)
	keys := map[string]string{}
	for _, op := range all {
		keys[op.ID] = op.Key
	}
	for _, id := range ops {
		if k := keys[id]; k != "" {
			if err := removeQuiet(s.keyPath(app, k)); err != nil {
				return nil, nil, err
			}
		}
		if err := removeQuiet(filepath.Join(s.opsDir(app), id+".json")); err != nil {
			return nil, nil, err
		}
	}
	for _, id := range revisions {
		if err := removeQuiet(filepath.Join(s.revDir(app), id+".json")); err != nil {
			return nil, nil, err
		}
	}
	for _, dir := range []string{s.opsDir(app), filepath.Join(s.opsDir(app), "keys"), s.revDir(app)} {
		if err := syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
	}
	return ops, revisions, nil
}

// countJSON counts the record files (*.json, not hidden) in dir; absent: 0.
func countJSON(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: list %s: %w", dir, err)
	}
	n := 0
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n, nil
}

// removeQuiet removes path (absent is fine) without fsyncing its
// directory: Prune fsyncs each directory once at the end.
func removeQuiet(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: remove %s: %w", path, err)
	}
	return nil
}
