package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TrafficStartWait is how long RequireLiveTraffic waits for an edge that
// is starting (its status written a moment ago, or none yet).
const TrafficStartWait = 3 * time.Second

// TrafficHint is what a refusal for a stopped edge says about where the
// edge runs and how to start it (RequireLiveTraffic).
type TrafficHint struct {
	// StateDir is the state directory the edge serves (named when it has
	// never run).
	StateDir string
	// Engine, when set, is the engine whose machine the edge runs on, as
	// the user named it ("context prod (ssh://…, remote)").
	Engine string
	// Start says how to start the edge; empty: "Start it with `docker
	// gordon edge start` (or `docker gordon edge run` in another
	// terminal)".
	Start string
}

// TrafficDownError is the refusal of a verb that needs a live edge while
// the edge does not run. It wraps ErrUnavailable.
type TrafficDownError struct {
	msg string
}

func (e *TrafficDownError) Error() string { return e.msg }

// Unwrap returns ErrUnavailable.
func (e *TrafficDownError) Unwrap() error { return core.ErrUnavailable }

// RequireLiveTraffic is the one rule for verbs that change routes (deploy,
// rollback, start, restart publish routes to new containers; stop and
// remove withdraw them; SPEC R68: the edge confirms every new route table
// before containers start serving or stop): it refuses, before anything is
// changed, while the traffic backend reports the edge not running, instead
// of creating candidates that would only fail at the switch, or marking an
// app stopped whose withdrawal can never be confirmed.
//
// The edge is not running when Traffic.Status fails (other than with
// ErrConflict, an edge serving another state directory, which
// checkTraffic refuses with its own reason) or reports Stale. An edge
// whose status was written within 2×TrafficStartWait (or never) may be
// starting: it gets up to TrafficStartWait to answer. No Traffic backend
// (validate) is no refusal.
//
// The error is a *TrafficDownError wrapping ErrUnavailable: "<verb>: the
// edge proxy is not running[ on <engine>]: <why>; nothing was changed.
// <how to start it>, then retry".
func (e *Engine) RequireLiveTraffic(ctx context.Context, verb string) error {
	return e.RequireLiveTrafficFor(ctx, nil, verb)
}

// requireLiveTraffic is RequireLiveTraffic for app: while this engine holds
// app's lock, its first Status answer is the lock hold's (heldChecks), so
// the preflight's checkTraffic does not ask again; a retry asks afresh and
// replaces it.
func (e *Engine) RequireLiveTrafficFor(ctx context.Context, c *HeldChecks, verb string) error {
	if e.Traffic == nil {
		return nil
	}
	deadline := time.Now().Add(TrafficStartWait)
	live, written, reason := e.trafficLive(ctx, c, true)
	// A status written seconds ago or none yet: maybe starting. An older
	// one from an edge that does not answer: stopped, no need to wait.
	starting := func() bool { return written.IsZero() || time.Since(written) < 2*TrafficStartWait }
	for !live && starting() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		live, written, reason = e.trafficLive(ctx, c, false)
	}
	if live {
		return nil
	}
	h := e.TrafficHint
	why := "it has never run for state directory " + h.StateDir
	switch {
	case reason != "" && written.IsZero():
		// A backend that can say why (a swarm's edge on one node that
		// does not answer) is quoted, not guessed at.
		why = "it does not answer: " + reason
	case !written.IsZero():
		why = "it does not answer on its admin address (last status " + written.Local().Format(time.RFC3339) + ")"
	}
	on := ""
	if h.Engine != "" {
		on = " on " + h.Engine
	}
	start := h.Start
	if start == "" {
		start = "Start it with `docker gordon edge start` (or `docker gordon edge run` in another terminal)"
	}
	return &TrafficDownError{msg: fmt.Sprintf("%s: the edge proxy is not running%s: %s; nothing was changed. %s, then retry", verb, on, why, start)}
}

// trafficLive asks the traffic backend once (bounded by 5 s): live unless
// Status failed (but for ErrConflict) or is Stale; written is when the
// edge last wrote its status (zero when unknown); reason is a stale
// status's error ("" when it gives none). With memo, a Status
// answer of app's lock hold is reused; every answer is remembered there.
func (e *Engine) trafficLive(ctx context.Context, c *HeldChecks, memo bool) (live bool, written time.Time, reason string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var st core.TrafficStatus
	var err error
	if memo && c != nil {
		st, err = e.TrafficStatus(ctx, c)
	} else {
		st, err = e.Traffic.Status(ctx)
		c.setStatus(st, err)
	}
	if err != nil {
		return errors.Is(err, core.ErrConflict), time.Time{}, ""
	}
	if st.Stale {
		reason = st.Error
	}
	return !st.Stale, st.UpdatedAt, reason
}
