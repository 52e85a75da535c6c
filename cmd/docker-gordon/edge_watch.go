package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

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

// ensureEdgeWatcher starts (or updates) edge start's watcher unless a
// gordon-reconcile of system start runs. An engine endpoint the watcher
// container cannot use (core.ErrInvalid: TLS or ssh:// seen from this CLI)
// is a warning, not a failure: the edge still runs, and routes follow the
// verbs until the next `reconcile`.
func ensureEdgeWatcher(cmd *cobra.Command, env *cliEnv) error {
	api := env.dockerCli.Client()
	st, err := docker.Inspect(cmd.Context(), api, docker.ReconcileName)
	if err != nil {
		return err
	}
	if st.State != "absent" && !isEdgeWatcher(st) {
		fmt.Fprintf(env.dockerCli.Out(), "%s: left as is (system start's, state %s)\n", docker.ReconcileName, st.State)
		return nil
	}
	u, err := reconcileUnit(env.opts.stateDir, env.dockerCli.DockerEndpoint().Host, reconcileUnitOpts{})
	if errors.Is(err, core.ErrInvalid) {
		fmt.Fprintf(env.dockerCli.Err(), "warning: no watcher: %v; routes follow the verbs until the next `docker gordon reconcile`\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	r, err := docker.Ensure(cmd.Context(), api, u)
	if err != nil {
		return fmt.Errorf("the edge runs, but its watcher does not: %w (retry `docker gordon edge start`, or --watch=false for the edge alone)", err)
	}
	printStart(env.dockerCli.Out(), u.Name, r)
	return nil
}

// stopEdgeWatcher stops edge start's watcher, if that is what runs as
// gordon-reconcile; system start's is left to `system stop`.
func stopEdgeWatcher(ctx context.Context, env *cliEnv) error {
	st, err := docker.Inspect(ctx, env.dockerCli.Client(), docker.ReconcileName)
	if err != nil || !isEdgeWatcher(st) || st.StateDir != env.opts.stateDir {
		return err
	}
	return runStopSystem(ctx, env, docker.ReconcileName, 30*time.Second)
}
