package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
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
	var httpAddr, adminAddr, accessLog string
	var tlsFlags edgeTLSFlags
	run := &cobra.Command{
		Use:   "run",
		Short: "Run gordon-edge in the foreground for this state directory",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := findEdgeBinary()
			if err != nil {
				return err
			}
			args := []string{bin, "run", "--state-dir", env.opts.stateDir, "--http-addr", httpAddr}
			if adminAddr != "" {
				args = append(args, "--admin-addr", adminAddr)
			}
			tlsArgs, err := tlsFlags.args(env.opts.stateDir, false)
			if err != nil {
				return err
			}
			args = append(args, tlsArgs...)
			if accessLog != accessLogStdout {
				args = append(args, "--access-log", accessLog)
			}
			env.close()
			return runChild(cmd.Context(), bin, args[1:])
		},
	}
	run.Flags().StringVar(&httpAddr, "http-addr", ":80", "HTTP listen address")
	run.Flags().StringVar(&adminAddr, "admin-addr", "", "admin address (GET /metrics, edge status); default a free loopback port")
	run.Flags().StringVar(&accessLog, "access-log", accessLogStdout, "access log, one JSON line per HTTP request: off, stdout or a file (rotated by size)")
	tlsFlags.register(run)
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
			var view edgeStatusView
			cs, cerr := docker.Inspect(cmd.Context(), env.dockerCli.Client(), docker.EdgeName)
			if cerr == nil && cs.State != "absent" {
				view.Container = &cs
			}
			st, err := edgeTrafficStatus(cmd.Context(), env)
			if err != nil {
				if view.Container != nil && !isJSON(format) {
					_ = renderSystemStatus(env.dockerCli.Out(), cs)
				}
				return fmt.Errorf("edge status: %w (is gordon-edge running? docker gordon edge start, or edge run)", err)
			}
			view.fill(st)
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
func renderEdgeStatus(w io.Writer, view edgeStatusView) error {
	if view.Container != nil {
		if err := renderSystemStatus(w, *view.Container); err != nil {
			return err
		}
	}
	if !view.Live {
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

// edgeStatusView is `edge status --format json`: what the traffic backend
// reports, plus the system container when there is one.
type edgeStatusView struct {
	AppliedGeneration uint64                     `json:"applied_generation"`
	Error             string                     `json:"error,omitempty"`
	Backends          []routetable.BackendStatus `json:"backends,omitempty"`
	// Live is false when the edge does not answer on its admin address:
	// the figures are then its last written status, from
	// StatusWrittenAt, not live counts.
	Live            bool                        `json:"live"`
	StatusWrittenAt time.Time                   `json:"status_written_at,omitzero"`
	Listeners       []routetable.ListenerStatus `json:"listeners,omitempty"`
	// RetiredBackends are the backends no route leads to any more (the
	// edge keeps their counters a few minutes after a switch).
	RetiredBackends []string       `json:"retired_backends,omitempty"`
	Container       *docker.Status `json:"container,omitempty"`
}

// fill copies the traffic status st into v.
func (v *edgeStatusView) fill(st core.TrafficStatus) {
	v.AppliedGeneration, v.Error, v.Backends = st.AppliedGeneration, st.Error, st.Backends
	v.Live, v.StatusWrittenAt = !st.Stale, st.UpdatedAt
	v.Listeners, v.RetiredBackends = st.Listeners, st.RetiredBackends
}

// edgeLive reports whether the traffic backend reports the edge answering
// (Status succeeds and is not stale).
func edgeLive(ctx context.Context, env *cliEnv) bool {
	st, err := edgeTrafficStatus(ctx, env)
	return err == nil && !st.Stale
}

// edgeTrafficStatus asks the traffic/edge plugin what the edge applied
// (bounded by 5s). Errors wrap the plugin's (core.ErrUnavailable when the
// edge never ran for this state directory).
func edgeTrafficStatus(ctx context.Context, env *cliEnv) (core.TrafficStatus, error) {
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

// runChild runs bin in the foreground until it exits. When ctx ends (Ctrl-C,
// SIGTERM, or the docker CLI's plugin socket closing) the child gets SIGTERM
// and time to drain; a second signal is not needed. The child dies with us
// (Pdeathsig) if this process is killed.
func runChild(ctx context.Context, bin string, args []string) error {
	c := exec.Command(bin, args...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := c.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = c.Process.Signal(syscall.SIGTERM)
		return <-done
	}
}

// findEdgeBinary looks for gordon-edge on PATH, then next to this binary.
func findEdgeBinary() (string, error) {
	if p, err := exec.LookPath("gordon-edge"); err == nil {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "gordon-edge")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if runnerSession != nil {
		return "", errors.New("gordon-edge is not in the runner image: install it next to docker-gordon on the machine you run docker gordon from (./install.sh); the runner image carries it from there")
	}
	return "", errors.New("gordon-edge not found on PATH: run ./install.sh")
}
