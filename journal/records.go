package journal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/gordon-deploy/docker-gordon/core"
)

// desiredRecord is apps/<app>/desired.json.
type desiredRecord struct {
	App      string `json:"app"`
	Revision string `json:"revision"`
}

// ListApps returns the names of apps with a live incarnation (an app.json),
// sorted. An app whose incarnation ended (R55) keeps its history on disk but
// is not listed.
func (s *Store) ListApps(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(s.appsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: list apps: %w", err)
	}
	apps := []string{}
	for _, e := range entries {
		if !e.IsDir() || validName("app", e.Name()) != nil {
			continue
		}
		if _, err := os.Stat(s.appFile(e.Name(), "app.json")); err == nil {
			apps = append(apps, e.Name())
		}
	}
	sort.Strings(apps)
	return apps, nil
}

// LoadApp returns apps/<app>/app.json; absent (never created, or incarnation
// ended) wraps core.ErrNotFound.
func (s *Store) LoadApp(ctx context.Context, app string) (core.AppInfo, error) {
	if err := validName("app", app); err != nil {
		return core.AppInfo{}, err
	}
	var a core.AppInfo
	p := s.appFile(app, "app.json")
	if err := readJSON(p, &a, '{', "app "+app); err != nil {
		return core.AppInfo{}, err
	}
	if a.Name != app || a.Incarnation == "" {
		return core.AppInfo{}, &CorruptError{Path: p, Err: fmt.Errorf("record names app %q with incarnation %q; want app %q with an incarnation", a.Name, a.Incarnation, app)}
	}
	return a, nil
}

// EnsureApp returns the app's identity, creating app.json with a fresh
// incarnation (random UUID) when absent. Callers hold the app lock.
func (s *Store) EnsureApp(ctx context.Context, app string) (core.AppInfo, error) {
	a, err := s.LoadApp(ctx, app)
	if err == nil || !errors.Is(err, core.ErrNotFound) {
		return a, err
	}
	a = core.AppInfo{Name: app, Incarnation: uuid.NewString(), CreatedAt: s.now()}
	if err := writeJSON(s.appFile(app, "app.json"), a); err != nil {
		return core.AppInfo{}, fmt.Errorf("app %s: %w", app, err)
	}
	return a, nil
}

// SaveRevision stores apps/<app>/revisions/<id>.json. Revisions are
// immutable: saving an existing id with the same content is a no-op, with
// different content an error wrapping core.ErrConflict.
func (s *Store) SaveRevision(ctx context.Context, rev core.Revision) error {
	if err := validName("app", rev.App); err != nil {
		return err
	}
	if err := validName("revision", rev.ID); err != nil {
		return err
	}
	p := filepath.Join(s.revDir(rev.App), rev.ID+".json")
	want, err := json.MarshalIndent(rev, "", "  ")
	if err != nil {
		return fmt.Errorf("app %s revision %s: encode: %w", rev.App, rev.ID, err)
	}
	old, err := s.LoadRevision(ctx, rev.App, rev.ID)
	switch {
	case err == nil:
		have, _ := json.MarshalIndent(old, "", "  ")
		if !bytes.Equal(have, want) {
			return fmt.Errorf("%w: app %s revision %s exists with different content; revisions are immutable", core.ErrConflict, rev.App, rev.ID)
		}
		return nil
	case !errors.Is(err, core.ErrNotFound):
		return err
	}
	return writeFileAtomic(p, append(want, '\n'))
}

// NextRevisionID returns "rev-<n+1>" where n is the highest existing
// "rev-<n>" of the app (rev-1 for the first). It reserves nothing: callers
// hold the app lock until they saved it.
func (s *Store) NextRevisionID(ctx context.Context, app string) (string, error) {
	if err := validName("app", app); err != nil {
		return "", err
	}
	ids, err := s.revisionIDs(app)
	if err != nil {
		return "", err
	}
	max := 0
	for _, id := range ids {
		if n, ok := revNumber(id); ok && n > max {
			max = n
		}
	}
	return "rev-" + strconv.Itoa(max+1), nil
}

func revNumber(id string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "rev-"))
	if !strings.HasPrefix(id, "rev-") || err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

func (s *Store) revisionIDs(app string) ([]string, error) {
	entries, err := os.ReadDir(s.revDir(app))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: app %s: list revisions: %w", app, err)
	}
	var ids []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			ids = append(ids, strings.TrimSuffix(n, ".json"))
		}
	}
	return ids, nil
}

// LoadRevision returns one revision; absent wraps core.ErrNotFound.
func (s *Store) LoadRevision(ctx context.Context, app, id string) (core.Revision, error) {
	if err := validName("app", app); err != nil {
		return core.Revision{}, err
	}
	if err := validName("revision", id); err != nil {
		return core.Revision{}, err
	}
	var r core.Revision
	p := filepath.Join(s.revDir(app), id+".json")
	if err := readJSON(p, &r, '{', "app "+app+" revision "+id); err != nil {
		return core.Revision{}, err
	}
	if r.ID != id || r.App != app {
		return core.Revision{}, &CorruptError{Path: p, Err: fmt.Errorf("record names app %q revision %q", r.App, r.ID)}
	}
	return r, nil
}

// ListRevisions returns every revision of the app, by creation time, then
// by rev number, then id. None → empty.
func (s *Store) ListRevisions(ctx context.Context, app string) ([]core.Revision, error) {
	if err := validName("app", app); err != nil {
		return nil, err
	}
	ids, err := s.revisionIDs(app)
	if err != nil {
		return nil, err
	}
	revs := make([]core.Revision, 0, len(ids))
	for _, id := range ids {
		r, err := s.LoadRevision(ctx, app, id)
		if err != nil {
			return nil, err
		}
		revs = append(revs, r)
	}
	sort.SliceStable(revs, func(i, j int) bool {
		a, b := revs[i], revs[j]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		na, oka := revNumber(a.ID)
		nb, okb := revNumber(b.ID)
		if oka && okb && na != nb {
			return na < nb
		}
		return a.ID < b.ID
	})
	return revs, nil
}

// SaveDesired points DESIRED (apps/<app>/desired.json) at revision id.
func (s *Store) SaveDesired(ctx context.Context, app, id string) error {
	if err := validName("app", app); err != nil {
		return err
	}
	if err := validName("revision", id); err != nil {
		return err
	}
	return writeJSON(s.appFile(app, "desired.json"), desiredRecord{App: app, Revision: id})
}

// LoadDesired returns DESIRED's revision id; absent wraps core.ErrNotFound.
func (s *Store) LoadDesired(ctx context.Context, app string) (string, error) {
	if err := validName("app", app); err != nil {
		return "", err
	}
	var d desiredRecord
	p := s.appFile(app, "desired.json")
	if err := readJSON(p, &d, '{', "app "+app+" desired revision"); err != nil {
		return "", err
	}
	if d.App != app || d.Revision == "" {
		return "", &CorruptError{Path: p, Err: fmt.Errorf("record names app %q revision %q", d.App, d.Revision)}
	}
	return d.Revision, nil
}

// LoadActive returns ACTIVE (apps/<app>/active.json); absent wraps
// core.ErrNotFound. Services is never nil on success.
func (s *Store) LoadActive(ctx context.Context, app string) (core.Active, error) {
	if err := validName("app", app); err != nil {
		return core.Active{}, err
	}
	return loadActiveFile(s.appFile(app, "active.json"), app)
}

func loadActiveFile(p, app string) (core.Active, error) {
	var a core.Active
	if err := readJSON(p, &a, '{', "app "+app+" ACTIVE"); err != nil {
		return core.Active{}, err
	}
	if a.App != app {
		return core.Active{}, &CorruptError{Path: p, Err: fmt.Errorf("record names app %q", a.App)}
	}
	for name, svc := range a.Services {
		if svc == nil {
			return core.Active{}, &CorruptError{Path: p, Err: fmt.Errorf("service %q is null", name)}
		}
	}
	if a.Services == nil {
		a.Services = map[string]*core.ActiveService{}
	}
	return a, nil
}

// SaveActive replaces ACTIVE of a.App.
func (s *Store) SaveActive(ctx context.Context, a core.Active) error {
	if err := validName("app", a.App); err != nil {
		return err
	}
	return writeJSON(s.appFile(a.App, "active.json"), a)
}

// LoadIntent returns the stopped intent; absent → the zero Intent (running).
func (s *Store) LoadIntent(ctx context.Context, app string) (core.Intent, error) {
	if err := validName("app", app); err != nil {
		return core.Intent{}, err
	}
	var in core.Intent
	err := readJSON(s.appFile(app, "intent.json"), &in, '{', "app "+app+" intent")
	if errors.Is(err, core.ErrNotFound) {
		return core.Intent{}, nil
	}
	return in, err
}

// SaveIntent replaces the app's intent.
func (s *Store) SaveIntent(ctx context.Context, app string, in core.Intent) error {
	if err := validName("app", app); err != nil {
		return err
	}
	return writeJSON(s.appFile(app, "intent.json"), in)
}

// keyPath is ops/keys/<hex sha256(key)>: the key index of ClaimOp.
func (s *Store) keyPath(app, key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.opsDir(app), "keys", hex.EncodeToString(sum[:]))
}

// ClaimOp claims op (SPEC R6). Callers hold the app lock: the claim is
// atomic because every writer of the app is serialized by it. With op.Key
// set and a key index entry (ops/keys/<sha256(key)>) naming an existing op,
// it returns that stored op and claimed=false. Otherwise it writes
// ops/<id>.json, then ops/LATEST, then the key index, and returns op with
// claimed=true. A crash before the key index is written leaves an unkeyed
// op (without effects: the claim never returned) that a replay does not
// find, so the replay claims anew; if it became LATEST, the next preamble
// finalizes it as an interrupted op. Claiming an id that
// already exists without a matching key wraps core.ErrConflict. R7 (refusing
// a claim over an unfinished op) is the engine's check, not the store's.
func (s *Store) ClaimOp(ctx context.Context, op core.Operation) (core.Operation, bool, error) {
	if err := validName("app", op.App); err != nil {
		return core.Operation{}, false, err
	}
	if err := validName("op", op.ID); err != nil {
		return core.Operation{}, false, err
	}
	if op.Key != "" {
		var idx keyRecord
		kp := s.keyPath(op.App, op.Key)
		err := readJSON(kp, &idx, '{', "app "+op.App+" op key")
		switch {
		case err == nil:
			stored, lerr := s.LoadOp(ctx, op.App, idx.Op)
			if lerr == nil {
				if stored.Key != op.Key {
					return core.Operation{}, false, &CorruptError{Path: kp, Err: fmt.Errorf("key index names op %s, whose key differs", idx.Op)}
				}
				return stored, false, nil
			}
			if !errors.Is(lerr, core.ErrNotFound) {
				return core.Operation{}, false, lerr
			}
		case !errors.Is(err, core.ErrNotFound):
			return core.Operation{}, false, err
		}
	}
	p := filepath.Join(s.opsDir(op.App), op.ID+".json")
	if _, err := os.Stat(p); err == nil {
		return core.Operation{}, false, fmt.Errorf("%w: app %s op %s already exists", core.ErrConflict, op.App, op.ID)
	}
	if err := writeJSON(p, op); err != nil {
		return core.Operation{}, false, err
	}
	if err := writeFileAtomic(filepath.Join(s.opsDir(op.App), "LATEST"), []byte(op.ID+"\n")); err != nil {
		return core.Operation{}, false, err
	}
	if op.Key != "" {
		if err := writeJSON(s.keyPath(op.App, op.Key), keyRecord{Op: op.ID}); err != nil {
			return core.Operation{}, false, err
		}
	}
	return op, true, nil
}

// keyRecord is ops/keys/<sha256(key)>.
type keyRecord struct {
	Op string `json:"op"`
}

// SaveOp replaces ops/<id>.json (it does not change LATEST).
func (s *Store) SaveOp(ctx context.Context, op core.Operation) error {
	if err := validName("app", op.App); err != nil {
		return err
	}
	if err := validName("op", op.ID); err != nil {
		return err
	}
	return writeJSON(filepath.Join(s.opsDir(op.App), op.ID+".json"), op)
}

// LoadOp returns one op; absent wraps core.ErrNotFound.
func (s *Store) LoadOp(ctx context.Context, app, id string) (core.Operation, error) {
	if err := validName("app", app); err != nil {
		return core.Operation{}, err
	}
	if err := validName("op", id); err != nil {
		return core.Operation{}, err
	}
	return loadOpFile(filepath.Join(s.opsDir(app), id+".json"), app, id)
}

func loadOpFile(p, app, id string) (core.Operation, error) {
	var op core.Operation
	if err := readJSON(p, &op, '{', "app "+app+" op "+id); err != nil {
		return core.Operation{}, err
	}
	if op.App != app || op.ID != id {
		return core.Operation{}, &CorruptError{Path: p, Err: fmt.Errorf("record names app %q op %q", op.App, op.ID)}
	}
	return op, nil
}

// LatestOp returns the op named by ops/LATEST; none wraps core.ErrNotFound.
func (s *Store) LatestOp(ctx context.Context, app string) (core.Operation, error) {
	if err := validName("app", app); err != nil {
		return core.Operation{}, err
	}
	p := filepath.Join(s.opsDir(app), "LATEST")
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return core.Operation{}, fmt.Errorf("app %s latest op: %w", app, core.ErrNotFound)
	}
	if err != nil {
		return core.Operation{}, fmt.Errorf("journal: read %s: %w", p, err)
	}
	id := strings.TrimSpace(string(data))
	if validName("op", id) != nil {
		return core.Operation{}, &CorruptError{Path: p, Err: fmt.Errorf("not an op id: %q", id)}
	}
	op, err := s.LoadOp(ctx, app, id)
	if errors.Is(err, core.ErrNotFound) {
		return core.Operation{}, &CorruptError{Path: p, Err: fmt.Errorf("names op %s, which does not exist", id)}
	}
	return op, err
}

// ListOps returns every op of the app, oldest first (by StartedAt, then id;
// generated ids are time-ordered). None → empty.
func (s *Store) ListOps(ctx context.Context, app string) ([]core.Operation, error) {
	if err := validName("app", app); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.opsDir(app))
	if errors.Is(err, fs.ErrNotExist) {
		return []core.Operation{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: app %s: list ops: %w", app, err)
	}
	ops := []core.Operation{}
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
			continue
		}
		op, err := s.LoadOp(ctx, app, strings.TrimSuffix(n, ".json"))
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	sort.SliceStable(ops, func(i, j int) bool {
		if !ops[i].StartedAt.Equal(ops[j].StartedAt) {
			return ops[i].StartedAt.Before(ops[j].StartedAt)
		}
		return ops[i].ID < ops[j].ID
	})
	return ops, nil
}

// LoadMarkers returns the app's markers (none → empty), in creation-time
// order then container ID (decision 6).
func (s *Store) LoadMarkers(ctx context.Context, app string) ([]core.Marker, error) {
	if err := validName("app", app); err != nil {
		return nil, err
	}
	return loadMarkersFile(s.appFile(app, "markers.json"), app)
}

func loadMarkersFile(p, app string) ([]core.Marker, error) {
	var ms []core.Marker
	err := readJSON(p, &ms, '[', "app "+app+" markers")
	if errors.Is(err, core.ErrNotFound) {
		return []core.Marker{}, nil
	}
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.App != app || m.Container == "" {
			return nil, &CorruptError{Path: p, Err: fmt.Errorf("marker of app %q container %q", m.App, m.Container)}
		}
	}
	if ms == nil {
		ms = []core.Marker{}
	}
	sortMarkers(ms)
	return ms, nil
}

func sortMarkers(ms []core.Marker) {
	sort.SliceStable(ms, func(i, j int) bool {
		if !ms[i].CreatedAt.Equal(ms[j].CreatedAt) {
			return ms[i].CreatedAt.Before(ms[j].CreatedAt)
		}
		if ms[i].Container != ms[j].Container {
			return ms[i].Container < ms[j].Container
		}
		return ms[i].Service < ms[j].Service
	})
}

// SaveMarker saves m, replacing the marker with the same (app, service,
// container) key (decision 6). Callers hold the app lock.
func (s *Store) SaveMarker(ctx context.Context, m core.Marker) error {
	if err := validName("app", m.App); err != nil {
		return err
	}
	if m.Container == "" {
		return fmt.Errorf("%w: app %s service %s: marker without container", core.ErrInvalid, m.App, m.Service)
	}
	ms, err := s.LoadMarkers(ctx, m.App)
	if err != nil {
		return err
	}
	out := ms[:0]
	for _, o := range ms {
		if o.Service != m.Service || o.Container != m.Container {
			out = append(out, o)
		}
	}
	out = append(out, m)
	sortMarkers(out)
	return writeJSON(s.appFile(m.App, "markers.json"), out)
}

// ClearMarker removes the marker for the key, whatever its reason; an absent
// marker is not an error.
func (s *Store) ClearMarker(ctx context.Context, app, service, container string) error {
	if err := validName("app", app); err != nil {
		return err
	}
	ms, err := s.LoadMarkers(ctx, app)
	if err != nil {
		return err
	}
	out := ms[:0]
	for _, o := range ms {
		if o.Service != service || o.Container != container {
			out = append(out, o)
		}
	}
	if len(out) == len(ms) {
		return nil
	}
	return writeJSON(s.appFile(app, "markers.json"), out)
}

// LoadOwnership returns apps/<app>/ownership.json; absent wraps
// core.ErrNotFound.
func (s *Store) LoadOwnership(ctx context.Context, app string) (core.Ownership, error) {
	if err := validName("app", app); err != nil {
		return core.Ownership{}, err
	}
	var o core.Ownership
	p := s.appFile(app, "ownership.json")
	if err := readJSON(p, &o, '{', "app "+app+" ownership"); err != nil {
		return core.Ownership{}, err
	}
	if o.App != app {
		return core.Ownership{}, &CorruptError{Path: p, Err: fmt.Errorf("record names app %q", o.App)}
	}
	return o, nil
}

// SaveOwnership replaces the app's ownership record.
func (s *Store) SaveOwnership(ctx context.Context, o core.Ownership) error {
	if err := validName("app", o.App); err != nil {
		return err
	}
	return writeJSON(s.appFile(o.App, "ownership.json"), o)
}

// LoadRecovery returns apps/<app>/recovery.json (decision 3); absent → the
// empty record.
func (s *Store) LoadRecovery(ctx context.Context, app string) (core.Recovery, error) {
	if err := validName("app", app); err != nil {
		return core.Recovery{}, err
	}
	var r core.Recovery
	err := readJSON(s.appFile(app, "recovery.json"), &r, '{', "app "+app+" recovery")
	if errors.Is(err, core.ErrNotFound) {
		return core.Recovery{}, nil
	}
	return r, err
}

// SaveRecovery replaces the app's recovery record.
func (s *Store) SaveRecovery(ctx context.Context, app string, r core.Recovery) error {
	if err := validName("app", app); err != nil {
		return err
	}
	return writeJSON(s.appFile(app, "recovery.json"), r)
}

// EndIncarnation ends the app's incarnation (R55): it copies ownership.json
// to archive/<incarnation>/ownership.json (with the retained volumes and
// secrets, which stay under secrets/<incarnation>/), then removes
// ownership, desired, active, intent, markers and recovery, and app.json
// last. Each step is idempotent and app.json goes last, so a crash midway is
// completed by calling it again. Revisions and ops are kept. No app.json
// wraps core.ErrNotFound.
func (s *Store) EndIncarnation(ctx context.Context, app string) error {
	info, err := s.LoadApp(ctx, app)
	if err != nil {
		return err
	}
	if err := validName("incarnation", info.Incarnation); err != nil {
		return fmt.Errorf("app %s: %w", app, err)
	}
	o, err := s.LoadOwnership(ctx, app)
	switch {
	case err == nil:
		if err := writeJSON(filepath.Join(s.appDir(app), "archive", info.Incarnation, "ownership.json"), o); err != nil {
			return err
		}
	case !errors.Is(err, core.ErrNotFound):
		return err
	}
	for _, n := range []string{"ownership.json", "desired.json", "active.json", "intent.json", "markers.json", "recovery.json", "app.json"} {
		if err := removeFile(s.appFile(app, n)); err != nil {
			return fmt.Errorf("app %s: end incarnation %s: %w", app, info.Incarnation, err)
		}
	}
	return nil
}
