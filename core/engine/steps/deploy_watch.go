package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"

	"github.com/gordon-deploy/docker-gordon/core"
)

// DefaultCandidateWatch is how often a candidate is inspected while its
// readiness is awaited (Engine.CandidateWatch zero value).
const DefaultCandidateWatch = 250 * time.Millisecond

// CandidateExitError is the error of a candidate that stopped running
// before it became ready (SPEC R17.6): it names the exit code and an OOM
// kill when the engine reports one. It wraps ErrNotReady.
type CandidateExitError struct {
	Container string
	// Status is the engine's status (exited, dead) or "removed".
	Status    string
	ExitCode  int
	OOMKilled bool
}

// Error implements error.
func (e *CandidateExitError) Error() string {
	if e.Status == "removed" {
		return fmt.Sprintf("candidate %s disappeared before it became ready (removed by someone else)", readiness.ShortID(e.Container))
	}
	msg := fmt.Sprintf("candidate %s exited with code %d before it became ready", readiness.ShortID(e.Container), e.ExitCode)
	if e.OOMKilled {
		msg += " (killed: out of memory; raise its memory limit)"
	}
	return msg + "; its last log lines follow"
}

// Unwrap makes errors.Is(err, ErrNotReady) hold.
func (e *CandidateExitError) Unwrap() error { return core.ErrNotReady }

// candidateExit inspects id and returns a *CandidateExitError when it is no
// longer running (exited, dead or gone); nil while it runs or when the
// inspect itself failed (the probe goes on and decides).
func (e *Engine) CandidateExit(ctx context.Context, id string) error {
	st, err := e.Runtime.InspectContainer(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return &CandidateExitError{Container: id, Status: "removed"}
	}
	if err != nil {
		return nil
	}
	return ExitOf(st)
}

// exitOf is candidateExit for a state already inspected. A candidate the
// engine is restarting exited too: that is what a runtime without
// core.RestartPolicySetter shows, whose candidates carry their policy.
func ExitOf(st core.ContainerState) error {
	switch st.Status {
	case core.StatusExited, core.StatusDead, core.StatusRestarting:
		return &CandidateExitError{Container: st.ID, Status: st.Status, ExitCode: st.ExitCode, OOMKilled: st.OOMKilled}
	}
	return nil
}

// watchCandidate returns a context derived from ctx that is cancelled with
// a *CandidateExitError as soon as an inspect every CandidateWatch finds
// id no longer running, and a stop function that ends the watch. After a
// wait under the returned context, exited(ctx) yields that error (nil when
// the candidate still ran or the caller's own context ended).
func (e *Engine) WatchCandidate(ctx context.Context, id string) (wctx context.Context, stop func(), exited func() error) {
	interval := e.CandidateWatch
	if interval <= 0 {
		interval = DefaultCandidateWatch
	}
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-wctx.Done():
				return
			case <-t.C:
				if err := e.CandidateExit(wctx, id); err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	end := func() {
		close(done)
		<-finished
	}
	exited = func() error {
		if ctx.Err() != nil {
			return nil
		}
		var ce *CandidateExitError
		if cause := context.Cause(wctx); errors.As(cause, &ce) {
			return ce
		}
		return nil
	}
	return wctx, func() { end(); cancel(nil) }, exited
}

// deferRestartPolicy leaves the candidate spec cs without its restart
// policy when the runtime can set it later (core.RestartPolicySetter), so
// an exit while the candidate is probed stays an exit the engine does not
// undo (R59). It reports whether the policy was deferred. With
// CreateWithRestartPolicy (a swarm, where changing the policy restarts the
// task) nothing is deferred.
func (e *Engine) DeferRestartPolicy(cs *core.ContainerSpec) bool {
	if _, ok := e.Runtime.(core.RestartPolicySetter); !ok || cs.RestartPolicy == "" || e.CreateWithRestartPolicy {
		return false
	}
	cs.RestartPolicy = ""
	return true
}

// grantRestartPolicy gives a ready candidate whose policy was deferred the
// workload restart policy, before ACTIVE can name it (R59), so every
// serving generation has it even when the command dies right after the
// switch. A runtime plugin without the operation leaves the generation
// without a policy: a warning says so (the periodic pass still restarts
// it); any other failure is returned and fails the candidate.
func (e *Engine) GrantRestartPolicy(ctx context.Context, service, id string) ([]core.Warning, error) {
	rs, ok := e.Runtime.(core.RestartPolicySetter)
	if !ok {
		return nil, nil
	}
	err := rs.SetRestartPolicy(ctx, id, WorkloadRestartPolicy)
	if errors.Is(err, errors.ErrUnsupported) {
		return []core.Warning{{Service: service, Leftover: id, Detail: "the runtime cannot set a restart policy after creation: " +
			"the engine does not restart this generation after a crash (the reconcile pass does)"}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("set restart policy %s of %s: %w", WorkloadRestartPolicy, readiness.ShortID(id), err)
	}
	return nil, nil
}

// ensureRestartPolicy gives a verified serving container that reports no
// restart policy ("no") the workload policy (R59): a command that died
// between creating a candidate and granting it never lets a serving
// generation stay without one. A runtime that reports no policy ("") is
// left alone; a failure is only logged (the next pass retries).
func (e *Engine) EnsureRestartPolicy(ctx context.Context, app, service string, st core.ContainerState) {
	rs, ok := e.Runtime.(core.RestartPolicySetter)
	if !ok || st.RestartPolicy != "no" || st.ID == "" {
		return
	}
	if err := rs.SetRestartPolicy(ctx, st.ID, WorkloadRestartPolicy); err != nil {
		e.Log().Warn("set restart policy of a serving container", "app", app, "service", service, "container", st.ID, "error", err)
	}
}
