package core

import (
	"context"
	"time"
)

// Store is the durable state of every app (SPEC 1.3 "State store",
// ARCHITECTURE §3). The journal package implements it on files; coretest
// has an in-memory one. Every save is atomic: a reader sees the old or the
// new record, never a torn one. Loads of an absent record return an error
// wrapping ErrNotFound unless stated otherwise; a torn or unparsable record
// returns an error naming its path that does NOT wrap ErrNotFound (it is
// never silently reset). Readers need no lock; writers of one app hold its
// AppLock.
type Store interface {
	// Recover is store self-recovery (R12, R49, R57): it removes leftover
	// temporary files and checks the schema VERSION (a newer schema is an
	// error wrapping ErrConflict, and nothing is rewritten).
	Recover(ctx context.Context) error

	// ListApps returns every app name, sorted.
	ListApps(ctx context.Context) ([]string, error)
	// LoadApp returns the app's identity (ErrNotFound if never created or
	// its incarnation ended).
	LoadApp(ctx context.Context, app string) (AppInfo, error)
	// EnsureApp returns the app's identity, creating it with a fresh
	// incarnation id when absent.
	EnsureApp(ctx context.Context, app string) (AppInfo, error)

	// Lock takes the app's exclusive cross-process lock (R1, decision 2),
	// waiting until ctx is done; it then fails with an error wrapping
	// ErrConflict that names the holder. A dead holder's lock is taken over.
	Lock(ctx context.Context, app string, holder LockHolder) (AppLock, error)
	// TryLock takes the lock only if it is free now (periodic pass).
	// ok=false with a nil error means busy.
	TryLock(ctx context.Context, app string, holder LockHolder) (lock AppLock, ok bool, err error)
	// LockHolder returns the current holder record, ErrNotFound if none.
	LockHolder(ctx context.Context, app string) (LockHolder, error)

	// SaveRevision stores an immutable revision (saving an existing id with
	// different content is ErrConflict). NextRevisionID returns a new id.
	SaveRevision(ctx context.Context, rev Revision) error
	NextRevisionID(ctx context.Context, app string) (string, error)
	LoadRevision(ctx context.Context, app, id string) (Revision, error)
	ListRevisions(ctx context.Context, app string) ([]Revision, error)
	// SaveDesired points DESIRED at revision id; LoadDesired returns it.
	SaveDesired(ctx context.Context, app, id string) error
	LoadDesired(ctx context.Context, app string) (string, error)

	LoadActive(ctx context.Context, app string) (Active, error)
	SaveActive(ctx context.Context, a Active) error

	// LoadIntent returns the zero Intent (running) when absent, not an error.
	LoadIntent(ctx context.Context, app string) (Intent, error)
	SaveIntent(ctx context.Context, app string, in Intent) error

	// ClaimOp atomically claims op (R6): when op.Key is set and an op with
	// that key exists, it returns the stored op and claimed=false (the
	// caller checks the fingerprint, R6/R8). Otherwise it persists op, makes
	// it the app's latest, and returns it with claimed=true.
	ClaimOp(ctx context.Context, op Operation) (stored Operation, claimed bool, err error)
	SaveOp(ctx context.Context, op Operation) error
	LoadOp(ctx context.Context, app, id string) (Operation, error)
	// LatestOp returns the most recently claimed op (ErrNotFound if none).
	LatestOp(ctx context.Context, app string) (Operation, error)
	// ListOps returns every op of the app, oldest first.
	ListOps(ctx context.Context, app string) ([]Operation, error)

	// LoadMarkers returns the app's markers (none → empty, no error), in
	// creation-time order then container ID (decision 6).
	LoadMarkers(ctx context.Context, app string) ([]Marker, error)
	// SaveMarker saves m, replacing any marker with the same key.
	SaveMarker(ctx context.Context, m Marker) error
	// ClearMarker removes the marker for the key, whatever its reason;
	// clearing an absent marker succeeds.
	ClearMarker(ctx context.Context, app, service, container string) error

	// RegisterClaims records claims (replacing any for the same port).
	RegisterClaims(ctx context.Context, claims []Claim) error
	// ReleaseClaims drops every claim of container; none → no error.
	ReleaseClaims(ctx context.Context, app, container string) error
	ListClaims(ctx context.Context) ([]Claim, error)

	// LoadOwnership returns the app's ownership (ErrNotFound when absent).
	LoadOwnership(ctx context.Context, app string) (Ownership, error)
	SaveOwnership(ctx context.Context, o Ownership) error

	// LoadRecovery returns the app's recovery record (absent → empty).
	LoadRecovery(ctx context.Context, app string) (Recovery, error)
	SaveRecovery(ctx context.Context, app string, r Recovery) error

	// EndIncarnation archives the ownership under the old incarnation id and
	// clears app.json, desired, active, intent, markers and recovery (R55).
	// Revisions and ops are kept for history.
	EndIncarnation(ctx context.Context, app string) error

	// Prune removes the app's oldest ops beyond the newest keepOps and its
	// oldest revisions beyond the newest keepRevisions, never an unfinished
	// op, the latest op, nor a revision DESIRED, ACTIVE or a kept op names
	// (retention.Select); 0 or less keeps every record of that kind. It
	// returns the removed ids, oldest first. Callers hold the app lock.
	Prune(ctx context.Context, app string, keepOps, keepRevisions int) (ops, revisions []string, err error)

	// Secrets (decision 13). Values are never logged or journaled.
	SetSecret(ctx context.Context, app, service, name string, value []byte) error
	GetSecret(ctx context.Context, app, service, name string) ([]byte, error)
	ListSecrets(ctx context.Context, app, service string) ([]string, error)
	RemoveSecret(ctx context.Context, app, service, name string) error
	// WriteContainerSecret writes a per-container copy for file delivery and
	// returns its host path; DeleteContainerSecrets removes all of them.
	WriteContainerSecret(ctx context.Context, app, container, name string, value []byte) (string, error)
	DeleteContainerSecrets(ctx context.Context, app, container string) error

	// Project files by ConfigFile.StoreName (R82): PutFile stores once and
	// returns the host path; FilePath's absent name wraps ErrNotFound.
	PutFile(ctx context.Context, app, name string, data []byte, mode uint32) (string, error)
	FilePath(ctx context.Context, app, name string) (string, error)
}

// AppLock is a held app lock.
type AppLock interface {
	// Unlock releases the lock; calling it twice is a no-op.
	Unlock() error
}

// Clock is the engine's time source (tests pin T0).
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock in UTC.
type SystemClock struct{}

// Now returns time.Now().UTC().
func (SystemClock) Now() time.Time { return time.Now().UTC() }
