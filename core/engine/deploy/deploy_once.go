package deploy

import (
	"context"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// RunOnceTimeout bounds one run of a one-shot service (Run == RunOnce):
// a run still going after it is killed and removed, and the step fails.
const RunOnceTimeout = 10 * time.Minute

// runOncePoll is how often a one-shot container is inspected for its exit.
const runOncePoll = 200 * time.Millisecond

// runOnce deploys a one-shot service (compose's target of
// service_completed_successfully): a container of the pinned revision is
// created with no restart policy (its ID journaled as the step's After
// before it starts, R5.3), started, and waited for until it exits. Exit
// status 0 is success; anything else, or RunOnceTimeout, fails the step
// (R14.4: later services, which depend on it, are untouched) with the
// exit status and the last log lines. The container is removed either
// way; it is never published in ACTIVE, never routed and never restarted,
// so every later verb ignores it.
func (s *serviceRun) runOnce(ctx context.Context) error {
	e := s.d.e
	s.res.Flow = steps.FlowRunOnce
	if _, err := e.ResolveBinds(s.d.checks, s.d.app, s.pin.spec); err != nil {
		return s.fail(ctx, err, nil)
	}
	if err, diags := s.createCandidate(ctx); err != nil {
		return s.fail(ctx, err, diags)
	}
	id := s.after
	started := time.Now()
	s.progress(steps.PhaseRun, id, 0)
	st, err := s.waitExit(ctx, id)
	took := time.Since(started).Round(time.Millisecond)
	var diags []string
	if err != nil || st.ExitCode != 0 {
		diags = e.LogTail(ctx, id, s.pin.secrets)
	}
	s.dropCandidate(ctx, id)
	switch {
	case err != nil:
		return s.fail(ctx, fmt.Errorf("one-shot container %s: %w", id, err), diags)
	case st.ExitCode != 0:
		return s.fail(ctx, fmt.Errorf("one-shot container %s exited with status %d after %s; the services that depend on it were not deployed", id, st.ExitCode, took), diags)
	}
	return s.succeed(ctx, fmt.Sprintf("ran to completion: exit 0 after %s", took))
}

// waitExit inspects id until it has exited (or is dead), bounded by
// RunOnceTimeout and ctx.
func (s *serviceRun) waitExit(ctx context.Context, id string) (core.ContainerState, error) {
	ctx, cancel := context.WithTimeout(ctx, RunOnceTimeout)
	defer cancel()
	t := time.NewTicker(runOncePoll)
	defer t.Stop()
	for {
		st, err := s.d.e.Runtime.InspectContainer(ctx, id)
		if err != nil {
			return st, fmt.Errorf("inspect: %w", err)
		}
		if st.Status == core.StatusExited || st.Status == core.StatusDead {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("still %s after %s: %w", st.Status, RunOnceTimeout, ctx.Err())
		case <-t.C:
		}
	}
}
