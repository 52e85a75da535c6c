package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// reconcileHasBoot reports whether this build's reconcile verb has --boot:
// the reconcile command beside cmd or beside one of its ancestors (as a
// CLI plugin the root is "docker" and the verbs hang below "gordon", so a
// lookup from the root alone never finds it).
func reconcileHasBoot(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		for _, sub := range c.Commands() {
			if sub.Name() == "reconcile" {
				return sub.Flags().Lookup("boot") != nil
			}
		}
	}
	return false
}

// newSystemCommand is `docker gordon system start|stop|status|logs`: the
// edge and the reconcile loop as Docker-managed system containers
// (ARCHITECTURE §1).
func newSystemCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "system",
		Short: "Run the edge and the reconcile loop as Docker-managed system containers",
		Long: `The system containers gordon-edge (gordon-edge run) and gordon-reconcile
(reconcile --watch --boot) are built locally FROM scratch from the installed
binaries, run on the host network with restart policy unless-stopped and the
state directory bind-mounted at the same path, so they come back with the
engine after a reboot; no registry and no systemd are needed.`,
	}

	start := newSystemStartCommand(env)

	keepEdge := false
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop and remove gordon-reconcile and gordon-edge",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env.platform().OnSwarm() {
				return system.StopSwarm(cmd.Context(), env.sysEnv(), keepEdge)
			}
			if keepEdge {
				return fmt.Errorf("--keep-edge: only on a swarm (to hand the edge to another manager's state directory); nothing was changed: %w", core.ErrInvalid)
			}
			if err := system.StopContainer(cmd.Context(), env.sysEnv(), docker.ReconcileName, 30*time.Second); err != nil {
				return err
			}
			return system.StopContainer(cmd.Context(), env.sysEnv(), docker.EdgeName, 35*time.Second)
		},
	}

	stop.Flags().BoolVar(&keepEdge, "keep-edge", false, "on a swarm: stop only this state directory's reconcile loop and leave the edge service serving (to hand the swarm to another manager: system start --adopt there)")

	status := newSystemStatusCommand(env)

	logs := newSystemLogsCommand(env, "logs edge|reconcile", "Show the logs of a system container",
		func(arg string) (string, error) {
			switch arg {
			case "edge", docker.EdgeName:
				return docker.EdgeName, nil
			case "reconcile", docker.ReconcileName:
				return docker.ReconcileName, nil
			}
			return "", fmt.Errorf("system container %q: want edge or reconcile: %w", arg, core.ErrInvalid)
		}, cobra.ExactArgs(1))

	rotate := &cobra.Command{
		Use:   "rotate-token",
		Short: "On a swarm: replace the edges' push and edge tokens without replacing an edge task",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return system.RotateToken(cmd.Context(), env.sysEnv())
		},
	}

	cmd.AddCommand(start, stop, status, logs, rotate)
	return cmd
}

// newSystemStartCommand is `system start`: build and run gordon-edge and
// gordon-reconcile (idempotent), then say where the edge listens.
func newSystemStartCommand(env *cliEnv) *cobra.Command {
	var edgeFlags edgeContainerFlags
	var interval time.Duration
	var swarmOpts swarmStartOpts
	start := &cobra.Command{
		Use:   "start",
		Short: "Start (or update) gordon-edge and gordon-reconcile; idempotent",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			remembered := edgeFlags.resolve(cmd, env.opts.stateDir)
			nodeID, onSwarm, err := system.ChooseSwarm(cmd.Context(), env.dockerCli.Client(), swarmOpts.runtime)
			if err != nil {
				return err
			}
			if onSwarm {
				res, err := system.StartSwarm(cmd.Context(), env.sysEnv(), swarmOpts.options(cmd, nodeID, edgeFlags, interval))
				if res.Ran {
					edgeFlags.httpAddr, edgeFlags.drain = res.HTTPAddr, res.Drain
					edgeFlags.remember(env.opts.stateDir)
				}
				return err
			}
			if env.platform().OnSwarm() {
				return fmt.Errorf("this state directory serves a swarm (%s): system start --runtime docker on it would strand its apps' services; use another --state-dir for a one-engine edge: %w",
					filepath.Join(env.opts.stateDir, swarm.ConfigFile), core.ErrConflict)
			}
			eu, err := edgeUnit(env.opts.stateDir, edgeFlags.httpAddr, edgeFlags.adminAddr, edgeFlags.drain)
			if err != nil {
				return err
			}
			if err := withEdgeTLS(&eu, &edgeFlags.tls, env.opts.stateDir); err != nil {
				return err
			}
			if err := withEdgeAccessLog(&eu, &edgeFlags.access, env.opts.stateDir); err != nil {
				return err
			}
			ru, err := system.ReconcileUnit(env.opts.stateDir, env.dockerCli.DockerEndpoint().Host, system.ReconcileOptions{
				Interval: interval,
				Boot:     reconcileHasBoot(cmd),
			})
			if err != nil {
				return err
			}
			if err := system.EnsureStateDir(env.opts.stateDir); err != nil {
				return err
			}
			api := env.dockerCli.Client()
			for _, u := range []docker.Unit{eu, ru} {
				r, err := docker.Ensure(cmd.Context(), api, u)
				if err != nil {
					return err
				}
				system.PrintStart(env.dockerCli.Out(), u.Name, r)
			}
			edgeFlags.remember(env.opts.stateDir)
			printEdgeAddr(env.dockerCli.Out(), edgeFlags, remembered)
			return nil
		},
	}
	edgeFlags.register(start)
	swarmOpts.register(start)
	start.Flags().DurationVar(&interval, "interval", engine.DefaultReconcileInterval, "time between reconcile passes")

	return start
}

// newSystemStatusCommand is `system status [--format json]`: both system
// containers and the edge's applied generation (or why it is unknown).
func newSystemStatusCommand(env *cliEnv) *cobra.Command {
	var format string
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the system containers (state, image, start time) and the edge's applied generation",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env.platform().OnSwarm() {
				return swarmSystemStatus(cmd.Context(), env, format)
			}
			view, err := system.Status(cmd.Context(), env.sysEnv(), func(ctx context.Context) (core.TrafficStatus, error) { return edgeTrafficStatus(ctx, env) })
			if err != nil {
				return err
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), view)
			}
			w := env.dockerCli.Out()
			if err := renderSystemStatus(w, view.Containers...); err != nil {
				return err
			}
			if view.EdgeAppliedGeneration != nil {
				fmt.Fprintf(w, "edge applied generation: %d\n", *view.EdgeAppliedGeneration)
			}
			if view.EdgeError != "" {
				fmt.Fprintf(w, "edge: %s\n", view.EdgeError)
			}
			return nil
		},
	}
	addFormatFlag(status, &format)

	return status
}
