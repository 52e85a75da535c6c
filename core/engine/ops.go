package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Fingerprint returns the request fingerprint of an operation (R6): a hex
// sha256 over the kind and the request's parts. Two requests with the same
// key and a different fingerprint conflict.
func Fingerprint(kind string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(kind))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sortedJoin is the fingerprint part of a service selection.
func sortedJoin(names []string) string {
	s := append([]string(nil), names...)
	sort.Strings(s)
	return strings.Join(s, ",")
}

// claimOp claims op for its app (R6, R7, R8). The caller holds the app lock
// and has reconciled the latest interrupted op.
//
//   - R7: while the app's latest op is not terminal and is another op (not a
//     replay of the same key), the claim is refused with ErrConflict.
//   - R6: op.ID is generated when empty; Store.ClaimOp persists it. A key
//     already used returns the stored op with claimed=false; a different
//     fingerprint is ErrConflict.
//   - R8: a replay returns the stored op, claimed=false and: nil when its
//     outcome is success; ErrConflict naming the outcome when terminal
//     otherwise; ErrConflict saying it is not terminal yet otherwise.
//
// On claimed=true the returned op is the persisted one.
func (e *Engine) claimOp(ctx context.Context, op core.Operation) (core.Operation, bool, error) {
	if op.ID == "" {
		op.ID = e.newOpID()
	}
	if op.StartedAt.IsZero() {
		op.StartedAt = e.now()
	}
	latest, err := e.Store.LatestOp(ctx, op.App)
	switch {
	case err == nil:
		replay := op.Key != "" && latest.Key == op.Key
		if !latest.Terminal() && latest.ID != op.ID && !replay {
			return core.Operation{}, false, fmt.Errorf("%w: app %s: operation %s (%s) has not reached a terminal outcome; run `docker gordon reconcile %s`",
				core.ErrConflict, op.App, latest.ID, latest.Kind, op.App)
		}
	case errors.Is(err, core.ErrNotFound):
	default:
		return core.Operation{}, false, fmt.Errorf("app %s: load latest operation: %w", op.App, err)
	}
	stored, claimed, err := e.Store.ClaimOp(ctx, op)
	if err != nil {
		return core.Operation{}, false, fmt.Errorf("app %s: claim operation %s: %w", op.App, op.ID, err)
	}
	if claimed {
		return stored, true, nil
	}
	if stored.Fingerprint != op.Fingerprint || stored.Kind != op.Kind {
		return stored, false, fmt.Errorf("%w: app %s: operation key %q was used by operation %s (%s) for a different request",
			core.ErrConflict, op.App, op.Key, stored.ID, stored.Kind)
	}
	return stored, false, replayError(stored)
}

// replayError is the R8 error disposition of a replayed op.
func replayError(op core.Operation) error {
	switch {
	case op.Outcome == core.OutcomeSuccess:
		return nil
	case op.Terminal():
		return fmt.Errorf("%w: app %s: operation %s (%s, key %q) already finished with outcome %s",
			core.ErrConflict, op.App, op.ID, op.Kind, op.Key, op.Outcome)
	default:
		return fmt.Errorf("%w: app %s: operation %s (%s, key %q) has not reached a terminal outcome",
			core.ErrConflict, op.App, op.ID, op.Kind, op.Key)
	}
}

// newOpID returns e.NewOpID() or a fresh "op-" + time-ordered UUID (R6).
func (e *Engine) newOpID() string {
	if e.NewOpID != nil {
		return e.NewOpID()
	}
	return NewOpID()
}

// failOp is SPEC R11: set outcome failed, append a failed step stepID
// (StepError, or StepTrafficPublish when the final routing apply was
// rejected) carrying msg, and save. A save failure is only logged.
func (e *Engine) failOp(ctx context.Context, op *core.Operation, stepID, msg string) {
	now := e.now()
	op.Outcome = core.OutcomeFailed
	op.FinishedAt = now
	op.Steps = append(op.Steps, core.Step{ID: stepID, State: core.StepFailed, Error: msg, StartedAt: now, UpdatedAt: now})
	if err := e.Store.SaveOp(context.WithoutCancel(ctx), *op); err != nil {
		e.log().Error("save failed operation", "app", op.App, "op", op.ID, "error", err)
	}
}

// App-level step ids (SPEC 1.2).
const (
	StepPreflight      = "preflight"
	StepPendingRetire  = "pending.retire"
	StepIntentStopped  = "intent.stopped"
	StepIntentRunning  = "intent.running"
	StepTrafficPublish = "traffic.publish"
	StepError          = "error"
)

// ServiceStepID returns "service.<name>.<verb>" (verb: replace, remove,
// stop, start, restart).
func ServiceStepID(service, verb string) string { return "service." + service + "." + verb }

// NewOpID returns "op-" + a time-ordered UUID (v7) in hex without dashes (R6).
func NewOpID() string {
	u, err := uuid.NewV7()
	if err != nil {
		u = uuid.New()
	}
	return "op-" + hex.EncodeToString(u[:])
}
