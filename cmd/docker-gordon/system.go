package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/dashboard"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/docker"
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
			return system.Stop(cmd.Context(), env.sysEnv(), keepEdge)
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
	var o system.StartOptions
	start := &cobra.Command{
		Use:   "start",
		Short: "Start (or update) gordon-edge and gordon-reconcile; idempotent",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Reconcile.Boot, o.Changed = reconcileHasBoot(cmd), cmd.Flags().Changed
			return system.Start(cmd.Context(), env.sysEnv(), o)
		},
	}
	registerEdgeFlags(start, &o.Edge)
	registerSwarmStartFlags(start, &o)
	start.Flags().DurationVar(&o.Reconcile.Interval, "interval", engine.DefaultReconcileInterval, "time between reconcile passes")
	start.Flags().StringVar(&o.Reconcile.Dashboard, "dashboard", "", "also serve the read-only dashboard from gordon-reconcile on the engine's host: --dashboard (on "+dashboard.DefaultAddr+") or --dashboard=ADDR, a loopback address")
	start.Flags().Lookup("dashboard").NoOptDefVal = dashboard.DefaultAddr

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
			view, err := system.Status(cmd.Context(), env.sysEnv(), env.edgeStatus)
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
