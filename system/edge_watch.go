package system

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// isEdgeWatcher reports whether st is gordon-reconcile as `edge start` runs it: `reconcile
// --watch` without --boot, so a container the engine restarts or moves
// (an engine restart, a reboot, a restart policy) is re-routed at its new
// address within about a second with the edge alone as with `system
// start` (SPEC R41.9). system start's gordon-reconcile (with --boot) does
// the same and more; edge start leaves it alone, and edge stop stops only
// its own.
func isEdgeWatcher(st docker.Status) bool {
	return st.State != "absent" && !slices.Contains(st.Cmd, "--boot")
}

// EnsureEdgeWatcher starts (or updates) edge start's watcher unless a
// gordon-reconcile of system start runs. An engine endpoint the watcher
// container cannot use (core.ErrInvalid: TLS or ssh:// seen from this CLI)
// is a warning, not a failure: the edge still runs, and routes follow the
// verbs until the next `reconcile`.
func EnsureEdgeWatcher(ctx context.Context, env Env) error {
	api := env.API
	st, err := docker.Inspect(ctx, api, docker.ReconcileName)
	if err != nil {
		return err
	}
	if st.State != "absent" && !isEdgeWatcher(st) {
		fmt.Fprintf(env.Out, "%s: left as is (system start's, state %s)\n", docker.ReconcileName, st.State)
		return nil
	}
	u, err := ReconcileUnit(env.StateDir, env.DockerHost, ReconcileOptions{})
	if errors.Is(err, core.ErrInvalid) {
		fmt.Fprintf(env.Err, "warning: no watcher: %v; routes follow the verbs until the next `docker gordon reconcile`\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	r, err := docker.Ensure(ctx, api, u)
	if err != nil {
		return fmt.Errorf("the edge runs, but its watcher does not: %w (retry `docker gordon edge start`, or --watch=false for the edge alone)", err)
	}
	PrintStart(env.Out, u.Name, r)
	return nil
}

// StopEdgeWatcher stops edge start's watcher, if that is what runs as
// gordon-reconcile; system start's is left to `system stop`.
func StopEdgeWatcher(ctx context.Context, env Env) error {
	st, err := docker.Inspect(ctx, env.API, docker.ReconcileName)
	if err != nil || !isEdgeWatcher(st) || st.StateDir != env.StateDir {
		return err
	}
	return StopContainer(ctx, env, docker.ReconcileName, 30*time.Second)
}
