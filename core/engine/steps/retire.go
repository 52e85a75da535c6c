package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// CleanupTimeout bounds removing a candidate after the caller's context
// ended (Ctrl-C, a deadline).
const CleanupTimeout = 30 * time.Second

// DefaultStopGrace is the stop grace used wherever none is declared (R25, §4).
const DefaultStopGrace = 30 * time.Second

// EffectiveGrace returns SPEC R25's effective grace: d when > 0, else 30 s.
func EffectiveGrace(d core.Duration) time.Duration {
	if d > 0 {
		return d.D()
	}
	return DefaultStopGrace
}

// RetireOptions parameterizes one retirement (SPEC R23).
type RetireOptions struct {
	// Service owns the container; it keys the marker and every warning.
	Service string
	// Grace is the stop grace; zero means the 30 s default (R25).
	Grace time.Duration
	// Force skips the stop and force-removes (R24, candidates).
	Force bool
	// ClearMarker clears the container's marker once retired (R23.7).
	ClearMarker bool
	// RetryOnLeak keeps the marker when the claims could not be released, so
	// a later pass retries the release (R22, R43). Stop, remove and
	// dropped-service removal leave it false.
	RetryOnLeak bool
	// PreStop are the service's pre_stop hooks (compose pre_stop, R72),
	// run in the container before its stop signal, best effort (a failure
	// is a warning); HookEnv is their GORDON_* environment. Ignored with
	// Force.
	PreStop []core.HookCommand
	HookEnv []string
}

// RetireResult reports one retirement (SPEC R23).
type RetireResult struct {
	// Gone: the container is confirmed stopped and removed (not-found counts).
	Gone bool
	// Released: its backend claims were released.
	Released bool
	// Settled: gone and released; only a settled retirement drops a
	// retirement-pending marker (R23.6).
	Settled bool
	// Warnings are cleanup warnings {Service, Leftover = container, Detail}
	// in the order they happened.
	Warnings []core.Warning

	cause error // first failure, kept for Err's error chain
}

// Err describes an incomplete retirement of container: nil when the result
// is gone and settled; else an error wrapping ErrConflict (and the first
// failure's cause) whose message carries the first warning's detail, or
// "container not confirmed gone" when there is none (R23 last line).
func (r RetireResult) Err(container string) error {
	if r.Gone && r.Settled {
		return nil
	}
	if r.cause != nil {
		return fmt.Errorf("%w: container %s: %w", core.ErrConflict, container, r.cause)
	}
	if len(r.Warnings) > 0 {
		return fmt.Errorf("%w: container %s: %s", core.ErrConflict, container, r.Warnings[0].Detail)
	}
	return fmt.Errorf("%w: container %s: container not confirmed gone", core.ErrConflict, container)
}

// retire retires one exact container, SPEC R23 steps 1–7:
//  1. empty ID → gone and settled;
//  2. unless Force, stop with Grace (zero → 30 s); not-found counts as
//     stopped; another error → warning "stop: <err>", not gone;
//  3. remove (force as given); not-found counts as removed; another error
//     → warning "remove: <err>", not gone;
//  4. gone: release its claims; failure → warning
//     "release backend claims: <err>";
//  5. delete its per-container secret files; failure → warning
//     "secret files cleanup failed: <err>" (does not affect Settled);
//  6. Settled = released;
//  7. ClearMarker and (released or not RetryOnLeak) → clear the marker of
//     (app, Service, container); failure → warning
//     "clear recovery inhibition: <err>".
//
// Retiring a gone container is idempotent. Never returns an error: the
// result says what happened.
func (e *Engine) Retire(ctx context.Context, app, container string, o RetireOptions) RetireResult {
	var r RetireResult
	if container == "" {
		r.Gone, r.Released, r.Settled = true, true, true
		return r
	}
	warn := func(err error) {
		if r.cause == nil {
			r.cause = err
		}
		r.Warnings = append(r.Warnings, core.Warning{Service: o.Service, Leftover: container, Detail: err.Error()})
	}
	// File-secret copies live under the container's NAME (they are written
	// before the container exists, decision 13); read it from the labels
	// while the container still exists.
	secretDirs := []string{container}
	if st, err := e.Runtime.InspectContainer(ctx, container); err == nil {
		if n := secretDirName(st); n != "" && n != container {
			secretDirs = append(secretDirs, n)
		}
	}
	if !o.Force {
		grace := o.Grace
		if grace <= 0 {
			grace = DefaultStopGrace
		}
		r.Warnings = append(r.Warnings, e.PreStop(ctx, app, container, o)...)
		e.Emit(ProgressEvent{App: app, Service: o.Service, Phase: PhaseStop, Detail: container})
		if err := e.Runtime.StopContainer(ctx, container, grace); err != nil && !errors.Is(err, core.ErrNotFound) {
			warn(fmt.Errorf("stop: %w", err))
			return r
		}
	}
	e.Emit(ProgressEvent{App: app, Service: o.Service, Phase: PhaseRemove, Detail: container})
	if err := e.Runtime.RemoveContainer(ctx, container, o.Force); err != nil && !errors.Is(err, core.ErrNotFound) {
		warn(fmt.Errorf("remove: %w", err))
		return r
	}
	r.Gone = true
	if err := e.Store.ReleaseClaims(ctx, app, container); err != nil {
		warn(fmt.Errorf("release backend claims: %w", err))
	} else {
		r.Released = true
	}
	for _, dir := range secretDirs {
		if err := e.Store.DeleteContainerSecrets(ctx, app, dir); err != nil {
			// Does not affect Settled and is not the cause of an incomplete retirement.
			r.Warnings = append(r.Warnings, core.Warning{Service: o.Service, Leftover: container,
				Detail: "secret files cleanup failed: " + err.Error()})
		}
	}
	r.Settled = r.Released
	if o.ClearMarker && (r.Released || !o.RetryOnLeak) {
		if err := e.Store.ClearMarker(ctx, app, o.Service, container); err != nil {
			warn(fmt.Errorf("clear recovery inhibition: %w", err))
		}
	}
	return r
}

// removeCandidate removes a candidate (SPEC R24): retire with Force (no
// stop, force removal) and no marker handling. It returns the cleanup
// warnings, with a "container not confirmed gone" warning when the candidate
// is not gone and nothing else says why; the caller attaches them to its
// failure so they never hide it.
//
// The removal runs on a context detached from the caller's cancellation
// (bounded by CleanupTimeout): a Ctrl-C during readiness must still remove
// the candidate rather than leave it running beside the old generation.
func (e *Engine) RemoveCandidate(ctx context.Context, app, service, id string) []core.Warning {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
	defer cancel()
	r := e.Retire(cctx, app, id, RetireOptions{Service: service, Force: true})
	if !r.Gone && len(r.Warnings) == 0 {
		r.Warnings = append(r.Warnings, core.Warning{Service: service, Leftover: id, Detail: "container not confirmed gone"})
	}
	return r.Warnings
}

// secretDirName is the name under which a container's file-secret copies
// were written: its decision-12 name, rebuilt from its labels.
func secretDirName(st core.ContainerState) string {
	app, svc, op := st.Labels[core.LabelApp], st.Labels[core.LabelService], st.Labels[core.LabelOp]
	if app == "" || svc == "" || op == "" {
		return ""
	}
	return ContainerName(app, svc, op)
}
