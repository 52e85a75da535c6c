package steps

import (
	"context"
	"fmt"
	"time"
)

// Retention is how many ops and revisions each app keeps ([retention] of
// <state>/config.toml): the newest Ops ops and the newest Revisions
// revisions, never an unfinished op nor a revision still named
// (core.Store.Prune). Zero or less keeps every record of that kind.
type Retention struct {
	Ops       int `json:"ops"`
	Revisions int `json:"revisions"`
}

// pruneBound bounds the prune that runs before an app lock is released.
const pruneBound = 10 * time.Second

// Prune applies e.Retention to app under its lock and returns the ids of
// the ops and revisions it removed, oldest first. The engine also applies
// it after every operation, before the app lock is released.
func (e *Engine) Prune(ctx context.Context, app string) (ops, revisions []string, err error) {
	lk, err := e.Lock(ctx, app, "prune", "")
	if err != nil {
		return nil, nil, fmt.Errorf("app %s: %w", app, err)
	}
	defer lk.Unlock()
	return e.Store.Prune(ctx, app, e.Retention.Ops, e.Retention.Revisions)
}

// pruneHeld applies e.Retention to app, whose lock this engine holds; a
// failure is logged and keeps the history, it never fails the operation.
func (e *Engine) pruneHeld(app string) {
	if e.Retention.Ops <= 0 && e.Retention.Revisions <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), pruneBound)
	defer cancel()
	ops, revs, err := e.Store.Prune(ctx, app, e.Retention.Ops, e.Retention.Revisions)
	if err != nil {
		e.Log().Warn("retention: old ops and revisions not pruned; they are kept", "app", app, "error", err)
		return
	}
	if len(ops)+len(revs) > 0 {
		e.Log().Debug("retention: pruned", "app", app, "ops", len(ops), "revisions", len(revs))
	}
}
