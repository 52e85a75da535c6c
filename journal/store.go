// Package journal is the file-based core.Store (ARCHITECTURE §3, SPEC
// decisions 1–3, 6, 13): one JSON record per file under the state
// directory, every write atomic (temp file, fsync, rename, fsync of the
// directory), per-app flock locks with a holder record, and self-recovery of
// leftover temporary files.
//
// Layout (relative to the state directory):
//
//	VERSION                                  schema version (1)
//	apps/<app>/lock, lock.json               app lock and its holder
//	apps/<app>/app.json                      core.AppInfo
//	apps/<app>/desired.json                  {"revision": id}
//	apps/<app>/revisions/<rev>.json          core.Revision (immutable)
//	apps/<app>/active.json                   core.Active
//	apps/<app>/intent.json                   core.Intent
//	apps/<app>/markers.json                  []core.Marker, sorted (decision 6)
//	apps/<app>/recovery.json                 core.Recovery
//	apps/<app>/ownership.json                core.Ownership
//	apps/<app>/archive/<inc>/ownership.json  ownership of an ended incarnation
//	apps/<app>/ops/<op>.json, ops/LATEST     core.Operation, latest op id
//	apps/<app>/ops/keys/<sha256(key)>        op id claimed with that key
//	claims.json, claims.lock                 []core.Claim of all apps
//	secrets/<inc>/<service>/<name>           secret values
//	secrets/<inc>/containers/<ctr>/<name>    per-container copies
//	edge/lock, edge/lock.json                traffic publication lock
package journal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// SchemaVersion is the state-directory schema this build reads and writes.
const SchemaVersion = 1

var _ core.Store = (*Store)(nil)

// Store is the file-based core.Store. It holds no cached state: every load
// reads the file, so several processes may share one state directory.
// Readers need no lock; writers of one app hold its lock (Lock/TryLock).
// Safe for concurrent use.
type Store struct {
	dir       string
	now       func() time.Time
	poll      time.Duration
	tempGrace time.Duration
}

// Option configures Open.
type Option func(*Store)

// WithClock sets the time source for created_at/started_at fields the store
// fills itself (default: time.Now().UTC()).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithLockPoll sets how often a waiting Lock retries (default 50 ms).
func WithLockPoll(d time.Duration) Option { return func(s *Store) { s.poll = d } }

// WithTempGrace sets the minimum age of a temporary file before Recover
// removes it (default 30 s), so a concurrent writer of another app never
// loses its in-progress temp file. Zero removes every temporary file.
func WithTempGrace(d time.Duration) Option { return func(s *Store) { s.tempGrace = d } }

// Open opens (creating when absent, mode 0700) the state directory dir and
// writes VERSION (schema 1) when it is absent. A VERSION newer than
// SchemaVersion is an error wrapping core.ErrConflict and the file is left
// untouched; an unreadable VERSION is a *CorruptError.
func Open(dir string, opts ...Option) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty state directory", core.ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: state directory %s: %v", core.ErrInvalid, dir, err)
	}
	s := &Store{
		dir:       abs,
		now:       func() time.Time { return time.Now().UTC() },
		poll:      50 * time.Millisecond,
		tempGrace: 30 * time.Second,
	}
	for _, o := range opts {
		o(s)
	}
	if err := ensureDir(abs); err != nil {
		return nil, err
	}
	if err := s.checkVersion(); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir returns the absolute state directory.
func (s *Store) Dir() string { return s.dir }

// DefaultDir returns the state directory when no --state-dir flag is given
// (ARCHITECTURE §3): $GORDON_STATE_DIR, else /var/lib/docker-gordon for
// root, else $XDG_STATE_HOME/docker-gordon, else
// ~/.local/state/docker-gordon. It fails only when the home directory is
// unknown.
func DefaultDir() (string, error) {
	return defaultDir(os.Getenv, os.Geteuid(), os.UserHomeDir)
}

func defaultDir(getenv func(string) string, euid int, home func() (string, error)) (string, error) {
	if d := getenv("GORDON_STATE_DIR"); d != "" {
		return d, nil
	}
	if euid == 0 {
		return "/var/lib/docker-gordon", nil
	}
	// XDG: a relative XDG_STATE_HOME is invalid and ignored.
	if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "docker-gordon"), nil
	}
	h, err := home()
	if err != nil || h == "" {
		return "", fmt.Errorf("%w: cannot find the state directory: set --state-dir or GORDON_STATE_DIR (home directory unknown: %v)", core.ErrInvalid, err)
	}
	return filepath.Join(h, ".local", "state", "docker-gordon"), nil
}

func (s *Store) versionPath() string { return filepath.Join(s.dir, "VERSION") }

// checkVersion writes VERSION when absent and refuses a newer schema.
func (s *Store) checkVersion() error {
	p := s.versionPath()
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return writeFileAtomic(p, []byte(strconv.Itoa(SchemaVersion)+"\n"))
	}
	if err != nil {
		return fmt.Errorf("journal: read %s: %w", p, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || v < 1 {
		return &CorruptError{Path: p, Err: fmt.Errorf("want a positive schema number, got %q", strings.TrimSpace(string(data)))}
	}
	if v > SchemaVersion {
		return fmt.Errorf("%w: state directory %s has schema %d; this docker-gordon understands up to %d: upgrade docker-gordon",
			core.ErrConflict, s.dir, v, SchemaVersion)
	}
	return nil
}

// Recover is store self-recovery (core.Store, SPEC R12, R49, R57): it checks
// VERSION (newer → core.ErrConflict, nothing rewritten) and removes
// renameio temporary files (".<name><digits>") older than the temp grace
// from the whole state directory except plugins/. Records are never touched.
func (s *Store) Recover(ctx context.Context) error {
	if err := s.checkVersion(); err != nil {
		return err
	}
	cutoff := time.Now().Add(-s.tempGrace)
	var errs []error
	walkErr := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			errs = append(errs, fmt.Errorf("journal: recover: %w", err))
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if d.IsDir() {
			if path == filepath.Join(s.dir, "plugins") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !tempName.MatchString(d.Name()) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		if s.tempGrace > 0 && fi.ModTime().After(cutoff) {
			return nil
		}
		if err := removeFile(path); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	if walkErr != nil {
		return fmt.Errorf("journal: recover %s: %w", s.dir, walkErr)
	}
	return errors.Join(errs...)
}

// Paths.

func (s *Store) appsDir() string              { return filepath.Join(s.dir, "apps") }
func (s *Store) appDir(app string) string     { return filepath.Join(s.dir, "apps", app) }
func (s *Store) appFile(app, n string) string { return filepath.Join(s.dir, "apps", app, n) }
func (s *Store) opsDir(app string) string     { return filepath.Join(s.dir, "apps", app, "ops") }
func (s *Store) revDir(app string) string     { return filepath.Join(s.dir, "apps", app, "revisions") }

// EdgeDir returns <state>/edge, where traffic/edge writes routes.json and
// gordon-edge writes status.json (ARCHITECTURE §3, §5).
func (s *Store) EdgeDir() string { return filepath.Join(s.dir, "edge") }

// PluginsDir returns <state>/plugins, one entry of the custom plugin path
// (ARCHITECTURE §1).
func (s *Store) PluginsDir() string { return filepath.Join(s.dir, "plugins") }
