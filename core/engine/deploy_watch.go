package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

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
		return fmt.Sprintf("candidate %s disappeared before it became ready (removed by someone else)", shortID(e.Container))
	}
	msg := fmt.Sprintf("candidate %s exited with code %d before it became ready", shortID(e.Container), e.ExitCode)
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
func (e *Engine) candidateExit(ctx context.Context, id string) error {
	st, err := e.Runtime.InspectContainer(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return &CandidateExitError{Container: id, Status: "removed"}
	}
	if err != nil {
		return nil
	}
	return exitOf(st)
}

// exitOf is candidateExit for a state already inspected.
func exitOf(st core.ContainerState) error {
	switch st.Status {
	case core.StatusExited, core.StatusDead:
		return &CandidateExitError{Container: st.ID, Status: st.Status, ExitCode: st.ExitCode, OOMKilled: st.OOMKilled}
	}
	return nil
}

// watchCandidate returns a context derived from ctx that is cancelled with
// a *CandidateExitError as soon as an inspect every CandidateWatch finds
// id no longer running, and a stop function that ends the watch. After a
// wait under the returned context, exited(ctx) yields that error (nil when
// the candidate still ran or the caller's own context ended).
func (e *Engine) watchCandidate(ctx context.Context, id string) (wctx context.Context, stop func(), exited func() error) {
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
				if err := e.candidateExit(wctx, id); err != nil {
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
