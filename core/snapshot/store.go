// Package snapshot is the store of volume snapshots under the state
// directory (docs/data.md): one zstd-compressed tar per volume per
// snapshot, and one manifest per snapshot that names them.
//
// Layout: <state>/snapshots/<app>/<id>/<volume>.tar.zst (an online
// dump's output: dump.zst) and <state>/snapshots/<app>/<id>/manifest.json. Every file is written to a
// temporary name, fsynced and renamed, and its directory fsynced; the
// manifest is written last, so a snapshot without one (a crash while it
// was taken) is partial: never listed, never restored, and removed by
// Sweep.
package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/durable"
)

// Triggers: what took a snapshot. Retention by keep counts each
// (service, trigger) on its own.
const (
	// TriggerDeploy: before a replacement of the service (deploy,
	// rollback, restart), after the old generation stopped.
	TriggerDeploy = "deploy"
	// TriggerManual: `snapshots create`.
	TriggerManual = "manual"
	// TriggerBackup: a scheduled backup.
	TriggerBackup = "backup"
	// TriggerImport: `snapshots import`.
	TriggerImport = "import"
)

// manifestFile is the commit point of a snapshot.
const manifestFile = "manifest.json"

// Manifest describes one snapshot: every volume of one service at one
// moment.
type Manifest struct {
	// ID is time ordered: "<UTC yyyymmdd-hhmmss.mmm>-<service>-<4 hex>".
	ID      string `json:"id"`
	App     string `json:"app"`
	Service string `json:"service"`
	// Trigger is one of the Trigger constants.
	Trigger string `json:"trigger"`
	// Op is the op that took it (the deploy it protects, for
	// TriggerDeploy), and Verb that op's verb.
	Op   string `json:"op,omitempty"`
	Verb string `json:"verb,omitempty"`
	// Revision is the revision that served the data (the old
	// generation's), which a rollback with its data goes back to.
	Revision  string        `json:"revision,omitempty"`
	Container string        `json:"container,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
	Duration  core.Duration `json:"duration,omitempty"`
	// Command, when set, is the online dump's argv ([services.X.backup]
	// command): the snapshot holds its output as one entry of kind
	// KindDump, not the volumes' files.
	Command []string `json:"command,omitempty"`
	Volumes []Volume `json:"volumes"`
}

// KindDump is Volume.Kind of an online dump's output.
const KindDump = "dump"

// IsDump reports whether m is an online dump (restored by the database's
// own tool, not by a restore).
func (m Manifest) IsDump() bool { return len(m.Command) > 0 }

// Volume is one volume of a snapshot.
type Volume struct {
	// Name is the engine's volume name; Path where the service mounts it.
	Name string `json:"volume"`
	Path string `json:"path"`
	// Size is the length in bytes of the (uncompressed) tar, Stored the
	// compressed file's, Digest "sha256:<hex>" of the tar.
	Size   int64  `json:"size"`
	Stored int64  `json:"stored"`
	Digest string `json:"digest"`
	// Kind is "" for a tar of the volume's files, KindDump for a
	// command's output (Name "dump", no Path).
	Kind string `json:"kind,omitempty"`
}

// File is the entry's file name in the snapshot's directory:
// <name>.tar.zst, or <name>.zst for a dump.
func (v Volume) File() string {
	if v.Kind == KindDump {
		return v.Name + ".zst"
	}
	return v.Name + ".tar.zst"
}

// Size is the total tar size of every volume.
func (m Manifest) Size() int64 {
	var n int64
	for _, v := range m.Volumes {
		n += v.Size
	}
	return n
}

// Stored is the total compressed size of every entry, in bytes.
func (m Manifest) Stored() int64 {
	var n int64
	for _, v := range m.Volumes {
		n += v.Stored
	}
	return n
}

// Kind is "dump" for an online dump, else "volumes".
func (m Manifest) Kind() string {
	if m.IsDump() {
		return KindDump
	}
	return "volumes"
}

// ByteSize renders n bytes in binary units ("512 B", "1.5 MiB").
func ByteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Store is the snapshot store of one state directory.
type Store struct {
	dir string
	// now is the clock (tests).
	now func() time.Time
	// mu and last make NewID strictly increasing in this process.
	mu   sync.Mutex
	last time.Time
}

// Open returns the store under stateDir (nothing is created until a
// snapshot is taken).
func Open(stateDir string) *Store {
	return &Store{dir: filepath.Join(stateDir, "snapshots"), now: time.Now}
}

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,120}$`)

// NewID returns a fresh snapshot id for service:
// "<UTC yyyymmdd-hhmmss.mmm>-<service>-<4 hex>". Ids this process hands
// out sort in the order it handed them out.
func (s *Store) NewID(service string) string {
	s.mu.Lock()
	t := s.now().UTC().Truncate(time.Millisecond)
	if !t.After(s.last) {
		t = s.last.Add(time.Millisecond)
	}
	s.last = t
	s.mu.Unlock()
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return t.Format("20060102-150405.000") + "-" + service + "-" + hex.EncodeToString(b)
}

func (s *Store) appDir(app string) string { return filepath.Join(s.dir, app) }

var appRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$`)

// checkApp refuses (core.ErrInvalid) an app name that is not one path
// component of the store: every entry point checks it before appDir.
func checkApp(app string) error {
	if !appRE.MatchString(app) {
		return fmt.Errorf("%w: %q is not an app name (letters, digits, '.', '_' and '-', starting with a letter or digit)", core.ErrInvalid, app)
	}
	return nil
}

func checkID(id string) error {
	if !idRE.MatchString(id) || strings.Contains(id, "..") {
		return fmt.Errorf("snapshot id %q: %w: want an id as `docker gordon snapshots ls` lists it", id, core.ErrInvalid)
	}
	return nil
}

// List returns the app's complete snapshots, oldest first (by id, which
// starts with the time it was taken). A partial snapshot (no manifest) is
// not listed.
func (s *Store) List(app string) ([]Manifest, error) {
	if err := checkApp(app); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.appDir(app))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list snapshots of %s: %w", app, err)
	}
	var out []Manifest
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		m, err := s.Get(app, e.Name())
		if errors.Is(err, core.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Manifest) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Get returns the manifest of snapshot id; a missing or partial one wraps
// core.ErrNotFound.
func (s *Store) Get(app, id string) (Manifest, error) {
	if err := checkApp(app); err != nil {
		return Manifest{}, err
	}
	if err := checkID(id); err != nil {
		return Manifest{}, err
	}
	b, err := os.ReadFile(filepath.Join(s.appDir(app), id, manifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return Manifest{}, fmt.Errorf("snapshot %s of app %s: %w; `docker gordon snapshots ls %s` lists them", id, app, core.ErrNotFound, app)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("read snapshot %s of %s: %w", id, app, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("read snapshot %s of %s: the manifest is damaged: %w", id, app, err)
	}
	return m, nil
}

// Remove deletes snapshot id (complete or partial); a missing one wraps
// core.ErrNotFound. The manifest goes first, so a crash midway leaves a
// partial snapshot, never a listed one without its files.
func (s *Store) Remove(app, id string) error {
	if err := checkApp(app); err != nil {
		return err
	}
	if err := checkID(id); err != nil {
		return err
	}
	dir := filepath.Join(s.appDir(app), id)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("snapshot %s of app %s: %w", id, app, core.ErrNotFound)
	}
	if err := os.Remove(filepath.Join(dir, manifestFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove snapshot %s of %s: %w", id, app, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove snapshot %s of %s: %w", id, app, err)
	}
	return durable.SyncDir(s.appDir(app))
}

// Retain removes the oldest complete snapshots of (app, service, trigger)
// beyond the newest keep, and returns their ids, oldest first. keep < 1
// keeps everything. Snapshots of other services or triggers are not
// counted.
func (s *Store) Retain(app, service, trigger string, keep int) ([]string, error) {
	if keep < 1 {
		return nil, nil
	}
	all, err := s.List(app)
	if err != nil {
		return nil, err
	}
	var mine []Manifest
	for _, m := range all {
		if m.Service == service && m.Trigger == trigger {
			mine = append(mine, m)
		}
	}
	var removed []string
	for len(mine) > keep {
		if err := s.Remove(app, mine[0].ID); err != nil {
			return removed, err
		}
		removed = append(removed, mine[0].ID)
		mine = mine[1:]
	}
	return removed, nil
}

// Partial lists the app's partial snapshots (no manifest: a crash or a
// failure while they were taken), which are never listed nor restored.
func (s *Store) Partial(app string) ([]string, error) {
	if err := checkApp(app); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.appDir(app))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshots of %s: %w", app, err)
	}
	var ids []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(s.appDir(app), e.Name(), manifestFile)); e.IsDir() && errors.Is(err, os.ErrNotExist) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Sweep removes the app's partial snapshots and returns their ids. Call
// it under the app's lock, so no snapshot is being taken.
func (s *Store) Sweep(app string) ([]string, error) {
	if err := checkApp(app); err != nil {
		return nil, err
	}
	ids, err := s.Partial(app)
	var removed []string
	for _, id := range ids {
		if err := os.RemoveAll(filepath.Join(s.appDir(app), id)); err != nil {
			return removed, fmt.Errorf("sweep snapshot %s of %s: %w", id, app, err)
		}
		removed = append(removed, id)
	}
	return removed, err
}

// Snapshot policies of core.ServiceSpec.SnapshotsBeforeDeploy.
const (
	// PolicyAuto snapshots volumes whose total is at most AutoLimit and
	// warns, without failing, above it.
	PolicyAuto = "auto"
	// PolicyAlways snapshots whatever the size.
	PolicyAlways = "always"
	// PolicyNever takes no snapshot before a replacement.
	PolicyNever = "never"
)

// AutoLimit bounds the volumes PolicyAuto snapshots (1 GiB of tar).
const AutoLimit = 1 << 30

// DefaultKeep is how many snapshots taken before replacements are kept
// per service.
const DefaultKeep = 5

// Policy returns the service's effective before-deploy policy and keep.
func Policy(s *core.ServiceSpec) (policy string, keep int) {
	policy, keep = PolicyAuto, DefaultKeep
	if s.SnapshotsBeforeDeploy != "" {
		policy = s.SnapshotsBeforeDeploy
	}
	if s.SnapshotsKeep > 0 {
		keep = s.SnapshotsKeep
	}
	return policy, keep
}

// Archiver is the runtime's volume I/O the snapshots use (the docker
// runtime and the plugin SDK's client implement it; a runtime without it,
// or one answering errors.ErrUnsupported, takes no snapshot): nothing is
// pulled. ExportVolume writes a tar of the volume mounted at path in the
// stopped container id, names relative to the volume's root (a running
// container wraps core.ErrConflict). RestoreVolume replaces the whole
// content of the named volume, which no running container uses, with the
// tar read from r (a missing volume wraps core.ErrNotFound).
type Archiver interface {
	ExportVolume(ctx context.Context, id, path string, w io.Writer) error
	RestoreVolume(ctx context.Context, volume string, r io.Reader) error
}

// StreamExecer is the runtime's exec an online dump uses
// ([services.X.backup] command; the docker runtime, coretest and the
// plugin SDK's client implement it): ExecStream runs x in the running
// container id without a terminal, writes the command's stdout to stdout
// byte for byte, passes each stderr line to stderr (without its newline;
// stderr may be nil), and returns the command's exit code once it exits.
// A failed write to stdout ends the stream with that error; when ctx ends
// first it returns ctx's error (in both cases the command may go on
// running in the container). Errors otherwise as core.ContainerExecer's;
// a runtime (plugin) without it answers errors.ErrUnsupported.
type StreamExecer interface {
	ExecStream(ctx context.Context, id string, x core.ExecSpec, stdout io.Writer, stderr func(line string)) (exitCode int, err error)
}

// DefaultDumpTimeout bounds one online dump when [services.X.backup] sets
// no timeout.
const DefaultDumpTimeout = time.Hour
