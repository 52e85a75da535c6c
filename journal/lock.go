package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/gordon-deploy/docker-gordon/core"
)

// fileLock is a held flock plus the holder record written beside it.
type fileLock struct {
	once   sync.Once
	fl     *flock.Flock
	record string
	err    error
}

// Unlock removes the holder record, then releases the flock. A second call is
// a no-op returning the first call's result.
func (l *fileLock) Unlock() error {
	l.once.Do(func() {
		rmErr := removeFile(l.record)
		ulErr := l.fl.Unlock()
		if ulErr != nil {
			ulErr = fmt.Errorf("journal: unlock %s: %w", l.fl.Path(), ulErr)
		}
		l.err = errors.Join(rmErr, ulErr)
	})
	return l.err
}

// Lock takes the app's exclusive cross-process lock (SPEC R1, decision 2):
// an flock on apps/<app>/lock, then lock.json beside it names the holder.
// It retries every poll interval until ctx is done and then fails with an
// error wrapping core.ErrConflict that names the holder ("app blog is locked
// by pid 123 (deploy, op op-…, since …)"). The kernel drops the flock of a
// dead process, so a dead holder's lock is simply taken over and its stale
// lock.json overwritten. Zero holder fields are filled: PID (this process),
// StartedAt (now), Host (hostname). An invalid app name wraps
// core.ErrInvalid.
func (s *Store) Lock(ctx context.Context, app string, holder core.LockHolder) (core.AppLock, error) {
	if err := validName("app", app); err != nil {
		return nil, err
	}
	return s.lockWait(ctx, s.appDir(app), "app "+app, holder)
}

// TryLock takes the app lock only if it is free now (periodic pass, R39):
// ok=false with a nil error means another process holds it.
func (s *Store) TryLock(ctx context.Context, app string, holder core.LockHolder) (core.AppLock, bool, error) {
	if err := validName("app", app); err != nil {
		return nil, false, err
	}
	l, ok, err := s.tryLock(s.appDir(app), holder)
	if err != nil {
		return nil, false, fmt.Errorf("app %s: %w", app, err)
	}
	return l, ok, nil
}

// LockHolder returns the holder recorded in apps/<app>/lock.json. No record,
// or a record whose process is no longer running (stale: its flock is gone
// with it), is an error wrapping core.ErrNotFound.
func (s *Store) LockHolder(ctx context.Context, app string) (core.LockHolder, error) {
	if err := validName("app", app); err != nil {
		return core.LockHolder{}, err
	}
	return s.holder(s.appDir(app), "app "+app)
}

// LockTraffic takes the global traffic-publication lock on edge/lock
// (decision 2, last line), waiting like Lock until ctx is done. The holder
// record names this process with verb "traffic".
func (s *Store) LockTraffic(ctx context.Context) (core.AppLock, error) {
	return s.lockWait(ctx, filepath.Join(s.dir, "edge"), "traffic publication", core.LockHolder{Verb: "traffic"})
}

func (s *Store) lockWait(ctx context.Context, dir, what string, holder core.LockHolder) (core.AppLock, error) {
	poll := s.poll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	for {
		l, ok, err := s.tryLock(dir, holder)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return l, nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, s.busyError(dir, what, ctx.Err())
		case <-t.C:
		}
	}
}

// tryLock makes one non-blocking attempt; on success it writes the holder
// record (a stale one from a dead holder is overwritten).
func (s *Store) tryLock(dir string, holder core.LockHolder) (*fileLock, bool, error) {
	if err := ensureDir(dir); err != nil {
		return nil, false, err
	}
	fl := flock.New(filepath.Join(dir, "lock"), flock.SetPermissions(fileMode))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, false, fmt.Errorf("journal: lock %s: %w", fl.Path(), err)
	}
	if !ok {
		return nil, false, nil
	}
	if holder.PID == 0 {
		holder.PID = os.Getpid()
	}
	if holder.StartedAt.IsZero() {
		holder.StartedAt = s.now()
	}
	if holder.Host == "" {
		holder.Host, _ = os.Hostname()
	}
	rec := filepath.Join(dir, "lock.json")
	if err := writeJSON(rec, holder); err != nil {
		_ = fl.Unlock()
		return nil, false, err
	}
	return &fileLock{fl: fl, record: rec}, true, nil
}

func (s *Store) holder(dir, what string) (core.LockHolder, error) {
	var h core.LockHolder
	if err := readJSON(filepath.Join(dir, "lock.json"), &h, '{', what+" lock holder"); err != nil {
		return core.LockHolder{}, err
	}
	if !pidAlive(h.PID) {
		return core.LockHolder{}, fmt.Errorf("%s lock holder: stale record of pid %d, which is not running: %w", what, h.PID, core.ErrNotFound)
	}
	return h, nil
}

// busyError names the holder of a lock we could not take in time.
func (s *Store) busyError(dir, what string, cause error) error {
	var h core.LockHolder
	err := readJSON(filepath.Join(dir, "lock.json"), &h, '{', what+" lock holder")
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s is locked by another process (holder unknown: %v); gave up: %v", core.ErrConflict, what, err, cause)
	case !pidAlive(h.PID):
		return fmt.Errorf("%w: %s is locked; its holder record names pid %d (%s), which is not running here (a process in another PID namespace may hold it); gave up: %v",
			core.ErrConflict, what, h.PID, h.Describe(), cause)
	default:
		return fmt.Errorf("%w: %s is locked by pid %d (%s); gave up: %v", core.ErrConflict, what, h.PID, h.Describe(), cause)
	}
}

// pidAlive reports whether a process with pid exists (signal 0: EPERM still
// means it exists).
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// plainLock is a held flock without a holder record (claims.lock).
type plainLock struct {
	once sync.Once
	fl   *flock.Flock
	err  error
}

// Unlock releases the flock; a second call is a no-op.
func (l *plainLock) Unlock() error {
	l.once.Do(func() { l.err = l.fl.Unlock() })
	return l.err
}

// lockFile takes an flock on path, retrying every poll interval until ctx
// is done (then an error wrapping core.ErrConflict).
func (s *Store) lockFile(ctx context.Context, path, what string) (*plainLock, error) {
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	poll := s.poll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	fl := flock.New(path, flock.SetPermissions(fileMode))
	for {
		ok, err := fl.TryLock()
		if err != nil {
			return nil, fmt.Errorf("journal: lock %s: %w", path, err)
		}
		if ok {
			return &plainLock{fl: fl}, nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: %s lock %s is busy; gave up: %v", core.ErrConflict, what, path, ctx.Err())
		case <-t.C:
		}
	}
}
