package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

func newEdgeCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "edge", Short: "The edge proxy (gordon-edge) that routes public traffic to serving generations: run in the foreground, or start|stop|status|logs as a system container"}
	cmd.AddCommand(newEdgeRunCommand(env), newEdgeStatusCommand(env))
	cmd.AddCommand(newEdgeContainerCommands(env)...)
	return cmd
}

// newEdgeRunCommand is `edge run`: gordon-edge in the foreground for this
// state directory, until Ctrl-C.
func newEdgeRunCommand(env *cliEnv) *cobra.Command {
	var o system.EdgeRunOptions
	run := &cobra.Command{
		Use:   "run",
		Short: "Run gordon-edge in the foreground for this state directory",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, args, err := system.EdgeRunCommand(env.sysEnv(), o)
			if err != nil {
				return err
			}
			env.close()
			return system.RunForeground(cmd.Context(), bin, args)
		},
	}
	run.Flags().StringVar(&o.HTTPAddr, "http-addr", ":80", "HTTP listen address")
	run.Flags().StringVar(&o.AdminAddr, "admin-addr", "", "admin address (GET /metrics, edge status); default a free loopback port")
	run.Flags().StringVar(&o.AccessLog, "access-log", system.AccessLogStdout, "access log, one JSON line per HTTP request: off, stdout or a file (rotated by size)")
	registerTLSFlags(run, &o.TLS)
	return run
}

// newEdgeStatusCommand is `edge status [--format json]`: the system
// container, then what the traffic backend reports the edge serves.
func newEdgeStatusCommand(env *cliEnv) *cobra.Command {
	var format string
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the edge system container (if any) and what the edge applied: generation, listeners, per-backend in-flight counts and passive-health ejections",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			view, err := system.InspectEdge(cmd.Context(), env.sysEnv(), env.edgeStatus)
			if err != nil {
				if view.Container != nil && !isJSON(format) {
					_ = renderSystemStatus(env.dockerCli.Out(), *view.Container)
				}
				return fmt.Errorf("edge status: %w (is gordon-edge running? docker gordon edge start, or edge run)", err)
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), view)
			}
			return renderEdgeStatus(env.dockerCli.Out(), view)
		},
	}
	addFormatFlag(status, &format)
	return status
}

// renderEdgeStatus writes `edge status` as text: the container, whether
// the edge answers, the applied generation, listeners, the last error and
// one line per backend (with its passive-health ejection, if any).
func renderEdgeStatus(w io.Writer, view system.EdgeView) error {
	if view.Container != nil {
		if err := renderSystemStatus(w, *view.Container); err != nil {
			return err
		}
	}
	switch {
	case !view.Live && view.Container != nil && view.Container.State == "running":
		fmt.Fprintf(w, "edge: its container runs, but its admin address does not answer from here (rootless Docker, or an engine in another network namespace? the admin address is on the engine's loopback); what follows is its last written status, from %s\n",
			view.StatusWrittenAt.Local().Format(time.RFC3339))
	case !view.Live:
		fmt.Fprintf(w, "edge: not running (no answer on its admin address); what follows is its last written status, from %s\n",
			view.StatusWrittenAt.Local().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "applied generation: %d\n", view.AppliedGeneration)
	for _, l := range view.Listeners {
		fmt.Fprintf(w, "listening: %s %s", l.Proto, l.Addr)
		if l.Error != "" {
			fmt.Fprintf(w, " (not bound: %s)", l.Error)
		}
		fmt.Fprintln(w)
	}
	if view.Error != "" {
		fmt.Fprintf(w, "last error: %s\n", view.Error)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "BACKEND\tSTATE\tIN-FLIGHT\tOPEN\tEJECTED")
	idle := 0
	for _, b := range view.Backends {
		state := "routed"
		if slices.Contains(view.RetiredBackends, b.Addr) {
			// Switched away from; the edge keeps it a few minutes for its
			// counts. Only one still serving something is worth a line.
			if b.InFlight == 0 && b.OpenConns == 0 {
				idle++
				continue
			}
			state = "retired"
		}
		ejected := "-"
		if !b.EjectedUntil.IsZero() {
			// Passive health (R21): out of the rotation until then.
			ejected = fmt.Sprintf("until %s (%s)", b.EjectedUntil.Local().Format(time.TimeOnly), b.EjectReason)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", b.Addr, state, b.InFlight, b.OpenConns, ejected)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if idle > 0 {
		fmt.Fprintf(w, "%d retired backends idle (listed by --format json)\n", idle)
	}
	return nil
}

// edgeLive reports whether the traffic backend reports the edge answering
// (Status succeeds and is not stale).
func edgeLive(ctx context.Context, env *cliEnv) bool {
	st, err := env.edgeStatus(ctx)
	return err == nil && !st.Stale
}

// edgeStatus asks the traffic/edge plugin what the edge applied (bounded
// by 5s): a system.EdgeStatus. Errors wrap the plugin's
// (core.ErrUnavailable when the edge never ran for this state directory).
func (env *cliEnv) edgeStatus(ctx context.Context) (core.TrafficStatus, error) {
	host, err := env.pluginHost()
	if err != nil {
		return core.TrafficStatus{}, err
	}
	tr, err := host.Traffic(ctx, "edge")
	if err != nil {
		return core.TrafficStatus{}, err
	}
	ctx, cancel := withTimeout(ctx, 5*time.Second)
	defer cancel()
	return tr.Status(ctx)
}

// newEdgeLogsCommand is `edge logs [-f] [--tail N] [--access [--app A]]`:
// the edge's own log (its stderr), or with --access its access log.
func newEdgeLogsCommand(env *cliEnv) *cobra.Command {
	var follow, access bool
	var tail string
	cmd := &cobra.Command{
		Use:   "logs [-f] [--tail N] [--access]",
		Short: "Show the logs of the gordon-edge system container (--access: its access log)",
		Long: `Show the edge's own log (route tables applied, errors). With --access show
its access log instead: one JSON line per HTTP request, from the edge
container's output or from the file edge start --access-log named.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tail != "all" {
				if n, err := strconv.Atoi(tail); err != nil || n < 0 {
					return fmt.Errorf("--tail %q: a number of lines or \"all\": %w", tail, core.ErrInvalid)
				}
			}
			out := env.dockerCli.Out()
			if access {
				return quietEnd(cmd.Context(), follow, system.ShowAccessLog(cmd.Context(), env.dockerCli.Client(), env.opts.stateDir, "", "", follow, tail, out))
			}
			if n, err := strconv.Atoi(tail); err == nil {
				return docker.StreamLogsLast(cmd.Context(), env.dockerCli.Client(), docker.EdgeName, follow, n, nil, out, nil)
			}
			return docker.StreamLogs(cmd.Context(), env.dockerCli.Client(), docker.EdgeName, follow, tail, nil, out)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log output")
	cmd.Flags().StringVar(&tail, "tail", "all", "number of lines to show from the end of the logs")
	cmd.Flags().BoolVar(&access, "access", false, "show the access log (one JSON line per HTTP request) instead of the edge's own log")
	return cmd
}

// quietEnd drops the error of a follow that ended because ctx did
// (Ctrl-C is how a follow ends).
func quietEnd(ctx context.Context, follow bool, err error) error {
	if err != nil && follow && ctx.Err() != nil {
		return nil
	}
	return err
}
