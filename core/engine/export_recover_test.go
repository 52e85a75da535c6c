package engine

import (
	"context"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// ExpForgetLive clears app's live-op mark, as the death of the process
// that claimed the op does (R45).
func (e *Engine) ExpForgetLive(app string) { e.flows().SetLive(app, "") }

// Exported shims of the engine foundations for the external test package
// (core_test imports core/coretest, which imports core, so those tests
// cannot live in package core). Prefix "Exp" keeps them apart from the
// shims other files may add.

func (e *Engine) ExpRetire(ctx context.Context, app, container string, o RetireOptions) RetireResult {
	return e.flows().Retire(ctx, app, container, o)
}
func (e *Engine) ExpRemoveCandidate(ctx context.Context, app, service, id string) []core.Warning {
	return e.flows().RemoveCandidate(ctx, app, service, id)
}
func (e *Engine) ExpRebuild(ctx context.Context) error { return e.flows().Rebuild(ctx) }
func (e *Engine) ExpWithdraw(ctx context.Context, app, service string) error {
	return e.flows().Withdraw(ctx, app, service)
}
func (e *Engine) ExpWithdrawState(ctx context.Context, app, service string) error {
	return e.flows().WithdrawState(ctx, app, service)
}
func (e *Engine) ExpRetryPendingWithdrawals(ctx context.Context, app string, services ...string) error {
	return e.flows().RetryPendingWithdrawals(ctx, app, services...)
}
func (e *Engine) ExpHasPendingWithdrawal(ctx context.Context, app, service string) (bool, error) {
	return e.flows().HasPendingWithdrawal(ctx, app, service)
}
func (e *Engine) ExpWaitDrained(ctx context.Context, addr string, limit time.Duration) (time.Duration, error) {
	return e.flows().WaitDrained(ctx, addr, limit)
}
func (e *Engine) ExpReconcileInterrupted(ctx context.Context, app, liveOp string) error {
	return e.flows().ReconcileInterrupted(ctx, app, liveOp)
}
