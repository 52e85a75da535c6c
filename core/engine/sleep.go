package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/scalezero"
)

// SleepRequest is one sleep or wake (scalezero.Request).
type SleepRequest = scalezero.Request

// zero is the scale-to-zero layer over e's flows.
func (e *Engine) zero() *scalezero.Engine {
	return &scalezero.Engine{Engine: e.flows().Oprun()}
}

// Sleep: see scalezero.Engine.Sleep.
func (e *Engine) Sleep(ctx context.Context, req SleepRequest) (*oprun.OpResult, error) {
	return e.zero().Sleep(ctx, req)
}

// Wake: see scalezero.Engine.Wake.
func (e *Engine) Wake(ctx context.Context, req SleepRequest) (*oprun.OpResult, error) {
	return e.zero().Wake(ctx, req)
}

// wakeFirst wakes every sleeping service of app before verb (deploy,
// restart and scale act on running services; SPEC R81), journaled as a
// wake. An app with nothing asleep, unknown, never deployed or stopped is
// left to verb, which says what it says of it. A failed wake is verb's
// error.
func (e *Engine) wakeFirst(ctx context.Context, app, verb string) error {
	if app == "" || e.Store == nil {
		return nil
	}
	a, err := e.Store.LoadActive(ctx, app)
	if err != nil || len(scalezero.Asleep(a)) == 0 {
		return nil
	}
	if in, err := e.Store.LoadIntent(ctx, app); err != nil || in.Stopped {
		return nil
	}
	_, err = e.Wake(ctx, SleepRequest{App: app, Reason: "woken for " + verb})
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("%s %s: wake its sleeping services first: %w", verb, app, err)
	}
	return nil
}
