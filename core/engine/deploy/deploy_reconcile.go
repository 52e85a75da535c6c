package deploy

import "context"

// reconcileLatest runs interrupted-op reconciliation (R45–R48) before a
// deploy claims its op (R12 start phase). liveOp is the op live in this
// process, which is never reconciled (R45).
func (e *Engine) reconcileLatest(ctx context.Context, app, liveOp string) error {
	return e.ReconcileInterrupted(ctx, app, liveOp)
}
