//go:build gordonfault

package faultstore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Crash injection for the crash-safety tests (SPEC R45–R48; test/e2e
// crash_test.go). Built only with -tags gordonfault.
//
//	GORDON_FAULT=<Method>#<N>  SIGKILL this process right after the N-th
//	                           successful call of that mutating Store method
//	                           (e.g. SaveOp#3)
//	GORDON_FAULT=any#<N>       SIGKILL right after the N-th successful
//	                           mutating write of any kind
//	GORDON_FAULT_FAIL=<Method>#<N>=<ENOSPC|EIO>
//	                           make the N-th call of that mutating Store
//	                           method fail with that errno (a full or
//	                           broken state disk) instead of writing; the
//	                           process goes on (the fault-injection suite)
//	GORDON_FAULT_LOG=<path>    append "<Method>#<k>" then "any#<n>", one per
//	                           line, for every successful mutating write
//	                           (before a possible kill), so a clean run
//	                           enumerates every boundary
//
// The runtime's creation of a candidate, between its create call and the
// journal save of its ID (R17.1–R17.2), is a boundary too, logged and
// killed at as "CreateContainer#<k>" (the engine's AfterCreate hook).
//
// The kill is a real kill -9 of the CLI (no deferred code, no cleanup);
// plugin subprocesses die with it through Pdeathsig. A failed write is not
// a boundary and is not counted. The mutating methods are SaveOp, ClaimOp,
// SaveActive, SaveMarker, ClearMarker, RegisterClaims, ReleaseClaims,
// SaveRecovery, SaveOwnership, SaveIntent, SaveDesired and SaveRevision.
const (
	envFault     = "GORDON_FAULT"
	envFaultLog  = "GORDON_FAULT_LOG"
	envFaultFail = "GORDON_FAULT_FAIL"
)

// Wrap wraps s with the crash hook when GORDON_FAULT or
// GORDON_FAULT_LOG is set; otherwise it returns s unchanged. A malformed
// GORDON_FAULT (not "<name>#<positive int>") makes the process exit 1 at
// once, so a test never silently runs without its fault.
func Wrap(s core.Store) core.Store {
	spec, logPath, failSpec := os.Getenv(envFault), os.Getenv(envFaultLog), os.Getenv(envFaultFail)
	if spec == "" && logPath == "" && failSpec == "" {
		return s
	}
	f := &faultingStore{Store: s, logPath: logPath, counts: map[string]int{}, calls: map[string]int{}}
	if failSpec != "" {
		at, kind, ok1 := strings.Cut(failSpec, "=")
		name, n, ok2 := strings.Cut(at, "#")
		k, err := strconv.Atoi(n)
		errno := map[string]syscall.Errno{"ENOSPC": syscall.ENOSPC, "EIO": syscall.EIO}[kind]
		if !ok1 || !ok2 || name == "" || err != nil || k < 1 || errno == 0 {
			fmt.Fprintf(os.Stderr, "%s=%q: want <Method>#<N>=<ENOSPC|EIO> with N >= 1\n", envFaultFail, failSpec)
			os.Exit(1)
		}
		f.failName, f.failAt, f.failErr = name, k, errno
	}
	if spec != "" {
		name, n, ok := strings.Cut(spec, "#")
		k, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || k < 1 {
			fmt.Fprintf(os.Stderr, "%s=%q: want <Method>#<N> or any#<N> with N >= 1\n", envFault, spec)
			os.Exit(1)
		}
		f.killName, f.killAt = name, k
	}
	return f
}

// faultingStore counts successful mutating writes and kills the process at
// the configured boundary. Reads pass through the embedded Store.
type faultingStore struct {
	core.Store
	logPath  string
	killName string
	killAt   int

	failName string
	failAt   int
	failErr  syscall.Errno

	mu     sync.Mutex
	counts map[string]int
	calls  map[string]int // every call, for GORDON_FAULT_FAIL
}

// inject fails the configured call of method (GORDON_FAULT_FAIL) with an
// *os.PathError carrying the errno, as a full or broken disk would.
func (f *faultingStore) inject(method string) error {
	if f.failName == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	if f.failName == method && f.calls[method] == f.failAt {
		return &os.PathError{Op: "write", Path: "(" + method + ")", Err: f.failErr}
	}
	return nil
}

// passed records one successful write of method and kills the process if
// that is the configured boundary.
func (f *faultingStore) passed(method string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[method]++
	f.counts["any"]++
	m, a := f.counts[method], f.counts["any"]
	if f.logPath != "" {
		if lf, err := os.OpenFile(f.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			_, _ = fmt.Fprintf(lf, "%s#%d\nany#%d\n", method, m, a)
			_ = lf.Close()
		}
	}
	if (f.killName == method && f.killAt == m) || (f.killName == "any" && f.killAt == a) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never return to the caller: the signal is on its way
	}
}

// after is the common tail of every mutating method.
func (f *faultingStore) after(method string, err error) error {
	if err == nil {
		f.passed(method)
	}
	return err
}

func (f *faultingStore) SaveOp(ctx context.Context, op core.Operation) error {
	if err := f.inject("SaveOp"); err != nil {
		return err
	}
	return f.after("SaveOp", f.Store.SaveOp(ctx, op))
}

func (f *faultingStore) ClaimOp(ctx context.Context, op core.Operation) (core.Operation, bool, error) {
	if err := f.inject("ClaimOp"); err != nil {
		return core.Operation{}, false, err
	}
	stored, claimed, err := f.Store.ClaimOp(ctx, op)
	if err == nil && claimed {
		f.passed("ClaimOp")
	}
	return stored, claimed, err
}

func (f *faultingStore) SaveActive(ctx context.Context, a core.Active) error {
	if err := f.inject("SaveActive"); err != nil {
		return err
	}
	return f.after("SaveActive", f.Store.SaveActive(ctx, a))
}

func (f *faultingStore) SaveMarker(ctx context.Context, m core.Marker) error {
	if err := f.inject("SaveMarker"); err != nil {
		return err
	}
	return f.after("SaveMarker", f.Store.SaveMarker(ctx, m))
}

func (f *faultingStore) ClearMarker(ctx context.Context, app, service, container string) error {
	if err := f.inject("ClearMarker"); err != nil {
		return err
	}
	return f.after("ClearMarker", f.Store.ClearMarker(ctx, app, service, container))
}

func (f *faultingStore) RegisterClaims(ctx context.Context, claims []core.Claim) error {
	if err := f.inject("RegisterClaims"); err != nil {
		return err
	}
	return f.after("RegisterClaims", f.Store.RegisterClaims(ctx, claims))
}

func (f *faultingStore) ReleaseClaims(ctx context.Context, app, container string) error {
	if err := f.inject("ReleaseClaims"); err != nil {
		return err
	}
	return f.after("ReleaseClaims", f.Store.ReleaseClaims(ctx, app, container))
}

func (f *faultingStore) SaveRecovery(ctx context.Context, app string, r core.Recovery) error {
	if err := f.inject("SaveRecovery"); err != nil {
		return err
	}
	return f.after("SaveRecovery", f.Store.SaveRecovery(ctx, app, r))
}

func (f *faultingStore) SaveOwnership(ctx context.Context, o core.Ownership) error {
	if err := f.inject("SaveOwnership"); err != nil {
		return err
	}
	return f.after("SaveOwnership", f.Store.SaveOwnership(ctx, o))
}

func (f *faultingStore) SaveIntent(ctx context.Context, app string, in core.Intent) error {
	if err := f.inject("SaveIntent"); err != nil {
		return err
	}
	return f.after("SaveIntent", f.Store.SaveIntent(ctx, app, in))
}

func (f *faultingStore) SaveDesired(ctx context.Context, app, id string) error {
	if err := f.inject("SaveDesired"); err != nil {
		return err
	}
	return f.after("SaveDesired", f.Store.SaveDesired(ctx, app, id))
}

func (f *faultingStore) SaveRevision(ctx context.Context, rev core.Revision) error {
	if err := f.inject("SaveRevision"); err != nil {
		return err
	}
	return f.after("SaveRevision", f.Store.SaveRevision(ctx, rev))
}

// AfterCreate returns the engine's AfterCreate hook for s: with the
// crash hook installed (s from Wrap), every candidate creation is the
// boundary "CreateContainer"; otherwise nil.
func AfterCreate(s core.Store) func(string) {
	f, ok := s.(*faultingStore)
	if !ok {
		return nil
	}
	return func(string) { f.passed("CreateContainer") }
}

var _ core.Store = (*faultingStore)(nil)

// TryLockJob passes the jobs' run lock through (core/engine/jobs.RunLocker).
func (f *faultingStore) TryLockJob(ctx context.Context, app, job string, holder core.LockHolder) (core.AppLock, bool, error) {
	l, ok := f.Store.(interface {
		TryLockJob(ctx context.Context, app, job string, holder core.LockHolder) (core.AppLock, bool, error)
	})
	if !ok {
		return nil, false, fmt.Errorf("%w: the state store cannot hold a job's run lock", core.ErrUnavailable)
	}
	return l.TryLockJob(ctx, app, job, holder)
}
