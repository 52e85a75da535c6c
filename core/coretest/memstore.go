package coretest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gordon-deploy/docker-gordon/core"
)

// MemStore is a complete in-memory core.Store. Every load and save
// deep-copies (through JSON, so records must also encode), so a test can
// never alias stored state. Faults are injected per method name (the Store
// method, e.g. "SaveActive", "SaveMarker", "ReleaseClaims", "LoadMarkers")
// with FailNext/FailTimes; a failed call changes nothing. Successful
// mutations append to Events: publish-active (ID app, Detail
// "svc=container,…"), marker-save (ID container, Detail reason),
// marker-clear (ID container), journal-claim and journal-save (ID op id,
// Detail = JSON of [{id,state,after}] of the steps, plus the outcome),
// claims-register (ID container, Detail ports), claims-release (ID
// container), intent-save, recovery-save, ownership-save, desired-save,
// end-incarnation (ID app), secrets-delete (ID container).
type MemStore struct {
	// Now stamps created apps and revisions (default time.Now().UTC()).
	Now func() time.Time
	// Hook, if set, runs on entry of every method (its name, e.g.
	// "SaveActive"); an error fails the call like FailNext. It runs with
	// the store locked: it must not call the store.
	Hook func(method string) error

	ev    *Events
	mu    sync.Mutex
	fails map[string][]failure
	calls map[string]int
	saves map[string]int

	apps      map[string]core.AppInfo
	known     map[string]bool
	revs      map[string][]core.Revision
	desired   map[string]string
	active    map[string]core.Active
	intent    map[string]core.Intent
	ops       map[string][]core.Operation
	latest    map[string]string
	markers   map[string][]core.Marker
	claims    []core.Claim
	owner     map[string]core.Ownership
	archived  map[string][]core.Ownership
	recovery  map[string]core.Recovery
	secrets   map[string][]byte // app/service/name
	csecrets  map[string][]byte // app/container/name
	files     map[string][]byte // app/name (project files, SPEC R82)
	locks     map[string]chan struct{}
	holders   map[string]core.LockHolder
	recovered int
	corrupt   map[string]error // app → LoadActive error (Corrupt)
}

// CorruptActive makes every LoadActive of app fail with err (a torn or
// unparsable active.json) until called with nil.
func (s *MemStore) CorruptActive(app string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.corrupt == nil {
		s.corrupt = map[string]error{}
	}
	if err == nil {
		delete(s.corrupt, app)
		return
	}
	s.corrupt[app] = err
}

var _ core.Store = (*MemStore)(nil)

// NewMemStore returns an empty store logging to ev (nil = no log).
func NewMemStore(ev *Events) *MemStore {
	return &MemStore{
		ev: ev, fails: map[string][]failure{}, calls: map[string]int{}, saves: map[string]int{},
		apps: map[string]core.AppInfo{}, known: map[string]bool{}, revs: map[string][]core.Revision{},
		desired: map[string]string{}, active: map[string]core.Active{}, intent: map[string]core.Intent{},
		ops: map[string][]core.Operation{}, latest: map[string]string{}, markers: map[string][]core.Marker{},
		owner: map[string]core.Ownership{}, archived: map[string][]core.Ownership{},
		recovery: map[string]core.Recovery{}, secrets: map[string][]byte{}, csecrets: map[string][]byte{}, files: map[string][]byte{},
		locks: map[string]chan struct{}{}, holders: map[string]core.LockHolder{},
	}
}

// FailNext makes the next call of method fail with err.
func (s *MemStore) FailNext(method string, err error) { s.FailTimes(method, err, 1) }

// FailTimes makes the next n calls of method fail with err (n <= 0: every
// call until ClearFailures).
func (s *MemStore) FailTimes(method string, err error, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n <= 0 {
		n = -1
	}
	s.fails[method] = append(s.fails[method], failure{method: method, err: err, times: n})
}

// ClearFailures drops every pending injected failure.
func (s *MemStore) ClearFailures() {
	s.mu.Lock()
	s.fails = map[string][]failure{}
	s.mu.Unlock()
}

// Saves returns how many calls of method succeeded.
func (s *MemStore) Saves(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves[method]
}

// Calls returns how many calls of method were made (failed ones included).
func (s *MemStore) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// ResetCounters zeroes Saves and Calls.
func (s *MemStore) ResetCounters() {
	s.mu.Lock()
	s.calls, s.saves = map[string]int{}, map[string]int{}
	s.mu.Unlock()
}

// enter locks s, counts the call and applies injected failures. On error
// the lock is released.
func (s *MemStore) enter(method string) error {
	s.mu.Lock()
	s.calls[method]++
	if s.Hook != nil {
		if err := s.Hook(method); err != nil {
			s.mu.Unlock()
			s.ev.AddDetail(strings.ToLower(method)+"-failed", "", err.Error())
			return err
		}
	}
	fs := s.fails[method]
	for i := range fs {
		if fs[i].times == 0 {
			continue
		}
		if fs[i].times > 0 {
			fs[i].times--
		}
		err := fs[i].err
		s.mu.Unlock()
		s.ev.AddDetail(strings.ToLower(method)+"-failed", "", err.Error())
		return err
	}
	return nil
}

// ok counts a successful call; caller holds s.mu and unlocks after.
func (s *MemStore) ok(method string) { s.saves[method]++ }

func (s *MemStore) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now().UTC()
}

// clone deep-copies v through JSON.
func clone[T any](v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("coretest: record does not encode: %v", err))
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("coretest: record does not decode: %v", err))
	}
	return out
}

func nf(what string) error { return fmt.Errorf("%s: %w", what, core.ErrNotFound) }

// Recover implements core.Store (counts calls; nothing to recover).
func (s *MemStore) Recover(ctx context.Context) error {
	if err := s.enter("Recover"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.ok("Recover")
	s.recovered++
	return nil
}

// ListApps implements core.Store: every app with an identity (app.json)
// or an ACTIVE record, sorted; an ended incarnation is not listed.
func (s *MemStore) ListApps(ctx context.Context) ([]string, error) {
	if err := s.enter("ListApps"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	s.ok("ListApps")
	out := []string{}
	for a := range s.known {
		_, hasInfo := s.apps[a]
		_, hasActive := s.active[a]
		if hasInfo || hasActive {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out, nil
}

// LoadApp implements core.Store.
func (s *MemStore) LoadApp(ctx context.Context, app string) (core.AppInfo, error) {
	if err := s.enter("LoadApp"); err != nil {
		return core.AppInfo{}, err
	}
	defer s.mu.Unlock()
	a, ok := s.apps[app]
	if !ok {
		return core.AppInfo{}, nf("app " + app)
	}
	s.ok("LoadApp")
	return a, nil
}

// EnsureApp implements core.Store.
func (s *MemStore) EnsureApp(ctx context.Context, app string) (core.AppInfo, error) {
	if err := s.enter("EnsureApp"); err != nil {
		return core.AppInfo{}, err
	}
	defer s.mu.Unlock()
	s.ok("EnsureApp")
	if a, ok := s.apps[app]; ok {
		return a, nil
	}
	a := core.AppInfo{Name: app, Incarnation: uuid.NewString(), CreatedAt: s.now()}
	s.apps[app] = a
	s.known[app] = true
	return a, nil
}

// Lock implements core.Store with one in-memory mutex per app; waiting ends
// with ctx, then the error wraps ErrConflict and names the holder.
func (s *MemStore) Lock(ctx context.Context, app string, holder core.LockHolder) (core.AppLock, error) {
	if err := s.enter("Lock"); err != nil {
		return nil, err
	}
	ch := s.lockChan(app)
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		s.mu.Lock()
		h := s.holders[app]
		s.mu.Unlock()
		return nil, fmt.Errorf("app %s: locked by pid %d (%s %s since %s): %w", app, h.PID, h.Verb, h.Op,
			h.StartedAt.Format(time.RFC3339), core.ErrConflict)
	}
	return s.held(app, holder), nil
}

// TryLock implements core.Store.
func (s *MemStore) TryLock(ctx context.Context, app string, holder core.LockHolder) (core.AppLock, bool, error) {
	if err := s.enter("TryLock"); err != nil {
		return nil, false, err
	}
	ch := s.lockChan(app)
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return s.held(app, holder), true, nil
	default:
		return nil, false, nil
	}
}

// lockChan returns the app's lock semaphore; caller holds s.mu.
func (s *MemStore) lockChan(app string) chan struct{} {
	ch, ok := s.locks[app]
	if !ok {
		ch = make(chan struct{}, 1)
		s.locks[app] = ch
	}
	return ch
}

func (s *MemStore) held(app string, holder core.LockHolder) core.AppLock {
	s.mu.Lock()
	s.holders[app] = holder
	s.ok("Lock")
	ch := s.locks[app]
	s.mu.Unlock()
	return &memLock{s: s, app: app, ch: ch}
}

type memLock struct {
	s    *MemStore
	app  string
	ch   chan struct{}
	once sync.Once
}

// Unlock implements core.AppLock; a second call is a no-op.
func (l *memLock) Unlock() error {
	l.once.Do(func() {
		l.s.mu.Lock()
		delete(l.s.holders, l.app)
		l.s.mu.Unlock()
		<-l.ch
	})
	return nil
}

// Locked reports whether app's lock is held.
func (s *MemStore) Locked(app string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.locks[app]
	return ok && len(ch) > 0
}

// LockHolder implements core.Store.
func (s *MemStore) LockHolder(ctx context.Context, app string) (core.LockHolder, error) {
	if err := s.enter("LockHolder"); err != nil {
		return core.LockHolder{}, err
	}
	defer s.mu.Unlock()
	h, ok := s.holders[app]
	if !ok {
		return core.LockHolder{}, nf("lock holder of app " + app)
	}
	s.ok("LockHolder")
	return h, nil
}

// SaveRevision implements core.Store: an existing id with different
// content is ErrConflict; identical content is a no-op.
func (s *MemStore) SaveRevision(ctx context.Context, rev core.Revision) error {
	if err := s.enter("SaveRevision"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	rev = clone(rev)
	for _, r := range s.revs[rev.App] {
		if r.ID == rev.ID {
			a, _ := json.Marshal(r)
			b, _ := json.Marshal(rev)
			if string(a) != string(b) {
				return fmt.Errorf("app %s revision %s exists with different content: %w", rev.App, rev.ID, core.ErrConflict)
			}
			s.ok("SaveRevision")
			return nil
		}
	}
	if rev.CreatedAt.IsZero() {
		rev.CreatedAt = s.now()
	}
	s.revs[rev.App] = append(s.revs[rev.App], rev)
	s.known[rev.App] = true
	s.ok("SaveRevision")
	return nil
}

// NextRevisionID implements core.Store: "rev-<n>", the smallest n >= the
// number of revisions that is unused.
func (s *MemStore) NextRevisionID(ctx context.Context, app string) (string, error) {
	if err := s.enter("NextRevisionID"); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	used := map[string]bool{}
	for _, r := range s.revs[app] {
		used[r.ID] = true
	}
	for n := len(s.revs[app]); ; n++ {
		id := "rev-" + strconv.Itoa(n)
		if !used[id] {
			s.ok("NextRevisionID")
			return id, nil
		}
	}
}

// LoadRevision implements core.Store.
func (s *MemStore) LoadRevision(ctx context.Context, app, id string) (core.Revision, error) {
	if err := s.enter("LoadRevision"); err != nil {
		return core.Revision{}, err
	}
	defer s.mu.Unlock()
	for _, r := range s.revs[app] {
		if r.ID == id {
			s.ok("LoadRevision")
			return clone(r), nil
		}
	}
	return core.Revision{}, nf("app " + app + " revision " + id)
}

// ListRevisions implements core.Store (save order).
func (s *MemStore) ListRevisions(ctx context.Context, app string) ([]core.Revision, error) {
	if err := s.enter("ListRevisions"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	s.ok("ListRevisions")
	return clone(append([]core.Revision{}, s.revs[app]...)), nil
}

// SaveDesired implements core.Store.
func (s *MemStore) SaveDesired(ctx context.Context, app, id string) error {
	if err := s.enter("SaveDesired"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.desired[app] = id
	s.known[app] = true
	s.ok("SaveDesired")
	s.ev.AddDetail("desired-save", app, id)
	return nil
}

// LoadDesired implements core.Store.
func (s *MemStore) LoadDesired(ctx context.Context, app string) (string, error) {
	if err := s.enter("LoadDesired"); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	id, ok := s.desired[app]
	if !ok {
		return "", nf("app " + app + " desired revision")
	}
	s.ok("LoadDesired")
	return id, nil
}

// LoadActive implements core.Store.
func (s *MemStore) LoadActive(ctx context.Context, app string) (core.Active, error) {
	if err := s.enter("LoadActive"); err != nil {
		return core.Active{}, err
	}
	defer s.mu.Unlock()
	if err := s.corrupt[app]; err != nil {
		return core.Active{}, err
	}
	a, ok := s.active[app]
	if !ok {
		return core.Active{}, nf("app " + app + " ACTIVE")
	}
	s.ok("LoadActive")
	return clone(a), nil
}

// SaveActive implements core.Store (event publish-active).
func (s *MemStore) SaveActive(ctx context.Context, a core.Active) error {
	if err := s.enter("SaveActive"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.active[a.App] = clone(a)
	s.known[a.App] = true
	s.ok("SaveActive")
	var parts []string
	for name, svc := range a.Services {
		if svc != nil {
			parts = append(parts, name+"="+svc.Container)
		}
	}
	sort.Strings(parts)
	s.ev.AddDetail("publish-active", a.App, strings.Join(parts, ","))
	return nil
}

// Active returns app's ACTIVE record and whether one exists (no counters).
func (s *MemStore) Active(app string) (core.Active, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.active[app]
	return clone(a), ok
}

// LoadIntent implements core.Store (absent → running).
func (s *MemStore) LoadIntent(ctx context.Context, app string) (core.Intent, error) {
	if err := s.enter("LoadIntent"); err != nil {
		return core.Intent{}, err
	}
	defer s.mu.Unlock()
	s.ok("LoadIntent")
	return s.intent[app], nil
}

// SaveIntent implements core.Store (event intent-save, Detail stopped=<bool>).
func (s *MemStore) SaveIntent(ctx context.Context, app string, in core.Intent) error {
	if err := s.enter("SaveIntent"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.intent[app] = in
	s.known[app] = true
	s.ok("SaveIntent")
	s.ev.AddDetail("intent-save", app, "stopped="+strconv.FormatBool(in.Stopped))
	return nil
}

// TryLockJob is the run lock of app's job (core/engine/jobs.RunLocker):
// one semaphore per app and job, apart from the app's lock.
func (s *MemStore) TryLockJob(ctx context.Context, app, job string, holder core.LockHolder) (core.AppLock, bool, error) {
	if err := s.enter("TryLockJob"); err != nil {
		return nil, false, err
	}
	key := app + "\x00job\x00" + job
	ch := s.lockChan(key)
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return s.held(key, holder), true, nil
	default:
		return nil, false, nil
	}
}
