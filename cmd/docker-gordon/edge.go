package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/routetable"
	"github.com/gordon-deploy/docker-gordon/plugins/runtime/docker/syscontainer"
)

func newEdgeCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "edge", Short: "The edge proxy (gordon-edge) that routes public traffic to serving generations: run in the foreground, or start|stop|status|logs as a system container"}

	var httpAddr, adminAddr string
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
			env.close()
			return runChild(cmd.Context(), bin, args[1:])
		},
	}
	run.Flags().StringVar(&httpAddr, "http-addr", ":80", "HTTP listen address")
	run.Flags().StringVar(&adminAddr, "admin-addr", "", "admin (metrics, status) address; default loopback")
	tlsFlags.register(run)

	var format string
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the edge system container (if any) and what the edge applied: generation, listeners, per-backend in-flight counts",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var view edgeStatusView
			cs, cerr := syscontainer.Inspect(cmd.Context(), env.dockerCli.Client(), syscontainer.EdgeName)
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
			view.TrafficStatus = st
			var file routetable.Status
			view.Live, file = edgeLive(cmd.Context(), env.opts.stateDir)
			view.StatusWrittenAt, view.Listeners = file.UpdatedAt, file.Listeners
			routed := map[string]bool{}
			if tbl, err := readEdgeFile[routetable.Table](env.opts.stateDir, routetable.RoutesFile); err == nil {
				for _, rt := range tbl.HTTP {
					for _, b := range rt.Backends {
						routed[b.Addr] = true
					}
				}
				for _, rt := range append(tbl.TCP, tbl.UDP...) {
					routed[rt.Backend] = true
				}
				for _, b := range st.Backends {
					if !routed[b.Addr] {
						view.RetiredBackends = append(view.RetiredBackends, b.Addr)
					}
				}
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), view)
			}
			w := env.dockerCli.Out()
			if view.Container != nil {
				if err := renderSystemStatus(w, cs); err != nil {
					return err
				}
			}
			if !view.Live {
				fmt.Fprintf(w, "edge: not running (no answer on its admin address); what follows is its last status.json, written %s\n",
					view.StatusWrittenAt.Local().Format(time.RFC3339))
			}
			fmt.Fprintf(w, "applied generation: %d\n", st.AppliedGeneration)
			for _, l := range view.Listeners {
				fmt.Fprintf(w, "listening: %s %s", l.Proto, l.Addr)
				if l.Error != "" {
					fmt.Fprintf(w, " (not bound: %s)", l.Error)
				}
				fmt.Fprintln(w)
			}
			if st.Error != "" {
				fmt.Fprintf(w, "last error: %s\n", st.Error)
			}
			tw := newTable(w)
			fmt.Fprintln(tw, "BACKEND\tSTATE\tIN-FLIGHT")
			for _, b := range st.Backends {
				state := "routed"
				if slices.Contains(view.RetiredBackends, b.Addr) {
					state = "retired" // switched away from; kept a few minutes for its counts
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\n", b.Addr, state, b.InFlight)
			}
			return tw.Flush()
		},
	}
	addFormatFlag(status, &format)
	cmd.AddCommand(run, status)
	cmd.AddCommand(newEdgeContainerCommands(env)...)
	return cmd
}

// edgeStatusView is `edge status --format json`: the traffic status fields
// at the top level, plus the system container when there is one.
type edgeStatusView struct {
	core.TrafficStatus
	// Live is false when the edge does not answer on the admin address
	// its status.json names: the figures are then the file's, from
	// StatusWrittenAt, not live counts.
	Live            bool                        `json:"live"`
	StatusWrittenAt time.Time                   `json:"status_written_at,omitzero"`
	Listeners       []routetable.ListenerStatus `json:"listeners,omitempty"`
	// RetiredBackends are the backends no route leads to any more (the
	// edge keeps their counters a few minutes after a switch).
	RetiredBackends []string             `json:"retired_backends,omitempty"`
	Container       *syscontainer.Status `json:"container,omitempty"`
}

// readEdgeFile decodes <stateDir>/edge/name as T.
func readEdgeFile[T any](stateDir, name string) (T, error) {
	var v T
	data, err := os.ReadFile(filepath.Join(stateDir, "edge", name))
	if err != nil {
		return v, err
	}
	return v, json.Unmarshal(data, &v)
}

// edgeStartWait is how long requireEdge waits for an edge that is starting.
const edgeStartWait = 3 * time.Second

// requireEdge fails fast, before any change, when the edge of this state
// directory is not running: a deploy would otherwise create and start its
// candidates and fail only at the switch (the edge confirms every new
// route table, SPEC R18).
func requireEdge(ctx context.Context, env *cliEnv, verb string) error {
	// An edge started a moment ago (edge start, edge run) gets up to
	// edgeStartWait to write its status and answer.
	deadline := time.Now().Add(edgeStartWait)
	live, st := edgeLive(ctx, env.opts.stateDir)
	written := st.UpdatedAt
	// A status written seconds ago or none yet: maybe starting. An older
	// one from an edge that does not answer: stopped, no need to wait.
	starting := func() bool { return written.IsZero() || time.Since(written) < 2*edgeStartWait }
	for !live && starting() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		live, st = edgeLive(ctx, env.opts.stateDir)
		written = st.UpdatedAt
	}
	if live {
		return nil
	}
	why := "it has never run for state directory " + env.opts.stateDir
	if !written.IsZero() {
		why = "it does not answer on its admin address (last status " + written.Local().Format(time.RFC3339) + ")"
	}
	if runnerSession != nil {
		// On a remote engine's machine: say how to start it from here.
		return fmt.Errorf("%s: the edge proxy is not running on %s: %s; nothing was changed. Start the edge and the reconcile loop there with `docker --context %s gordon system start`, then retry",
			verb, runnerSession.engine, why, runnerSession.context)
	}
	return fmt.Errorf("%s: the edge proxy is not running: %s; nothing was changed. Start it with `docker gordon edge start` (or `docker gordon edge run` in another terminal), then retry", verb, why)
}

// edgeLive reports whether the edge of stateDir answers GET /healthz on the
// admin address in its status.json (1 s), and returns that file (zero when
// unreadable).
func edgeLive(ctx context.Context, stateDir string) (bool, routetable.Status) {
	st, err := readEdgeFile[routetable.Status](stateDir, routetable.StatusFile)
	if err != nil || st.AdminAddr == "" {
		return false, st
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+st.AdminAddr+"/healthz", nil)
	if err != nil {
		return false, st
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, st
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, st
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
