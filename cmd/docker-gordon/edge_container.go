package main

// The CLI side of the system containers: the edge's unit, the flags of
// `edge start` and `system start` (remembered in <state>/edge/start.json),
// and the edge start|stop|logs commands. The Docker plumbing is
// plugins/runtime/docker/docker.

import (
	"encoding/json"
	"fmt"
	"github.com/google/renameio/v2/maybe"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// renderSystemStatus writes one line per container.
func renderSystemStatus(w io.Writer, sts ...docker.Status) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "CONTAINER\tSTATE\tIMAGE\tSTARTED\tRESTARTS")
	for _, s := range sts {
		started := "-"
		if s.StartedAt != nil && s.State == string(container.StateRunning) {
			started = s.StartedAt.Local().Format(time.RFC3339)
		}
		img := s.Image
		if img == "" {
			img = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", s.Name, s.State, img, started, s.RestartCount)
	}
	return tw.Flush()
}

// edgeUnit is the gordon-edge system container: /gordon-edge run on the
// host network with the state directory at the same path.
func edgeUnit(stateDir, httpAddr, adminAddr string, drain time.Duration) (docker.Unit, error) {
	bin, err := findEdgeBinary()
	if err != nil {
		return docker.Unit{}, fmt.Errorf("%w: %w", core.ErrNotFound, err)
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return docker.Unit{}, fmt.Errorf("gordon-edge binary: %w", err)
	}
	if httpAddr == "" {
		return docker.Unit{}, fmt.Errorf("--http-addr is required: %w", core.ErrInvalid)
	}
	cmd := []string{"run", "--state-dir", stateDir, "--http-addr", httpAddr}
	if adminAddr != "" {
		cmd = append(cmd, "--admin-addr", adminAddr)
	}
	if drain <= 0 {
		drain = defaultEdgeDrain
	}
	if drain != defaultEdgeDrain {
		cmd = append(cmd, "--shutdown-timeout", drain.String())
	}
	return docker.Unit{
		Kind:       "edge",
		Name:       docker.EdgeName,
		Binaries:   map[string]string{"/gordon-edge": bin},
		Entrypoint: []string{"/gordon-edge"},
		Cmd:        cmd,
		Env:        []string{"GORDON_STATE_DIR=" + stateDir, "TMPDIR=/tmp"},
		Binds:      []string{stateDir + ":" + stateDir},
		User:       system.ContainerUser(),
		StateDir:   stateDir,
		StopGrace:  drain + 5*time.Second, // gordon-edge's drain bound, then a margin
		Handover:   true,
	}, nil
}

// defaultEdgeDrain is gordon-edge's default --shutdown-timeout: how long a
// stopping or superseded edge lets its in-flight requests and streams run.
const defaultEdgeDrain = 30 * time.Second

// edgeContainerFlags are the flags of `edge start` and `system start`.
type edgeContainerFlags struct {
	httpAddr, adminAddr string
	drain               time.Duration
	tls                 edgeTLSFlags
	access              edgeAccessFlags
}

// edgeStartFile (in <state>/edge) remembers the addresses of the last
// `edge start` / `system start`, so a later start without flags comes back
// where it was (a demo on 127.0.0.1:8080 must not reappear on :80).
const edgeStartFile = "start.json"

type edgeStartAddrs struct {
	HTTPAddr  string `json:"http_addr"`
	AdminAddr string `json:"admin_addr,omitempty"`
	// Drain is --drain-timeout in seconds (0: the default).
	Drain float64 `json:"drain_seconds,omitempty"`
	edgeStartTLS
	edgeStartAccess
}

func (f *edgeContainerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.httpAddr, "http-addr", ":80", "public HTTP listen address of the edge (host network); default: the last start's, else :80")
	cmd.Flags().StringVar(&f.adminAddr, "admin-addr", "127.0.0.1:9180", "loopback admin address of the edge (GET /metrics, edge status); default: the last start's")
	cmd.Flags().DurationVar(&f.drain, "drain-timeout", defaultEdgeDrain, "how long a stopping or upgraded edge lets in-flight requests and streams (SSE, WebSocket, TCP relays) run before it cuts them; default: the last start's")
	f.tls.register(cmd)
	f.access.register(cmd)
}

// resolve fills the addresses not given on the command line from the last
// start (edgeStartFile); it reports whether any came from there.
func (f *edgeContainerFlags) resolve(cmd *cobra.Command, stateDir string) bool {
	data, err := os.ReadFile(filepath.Join(stateDir, "edge", edgeStartFile))
	if err != nil {
		return false
	}
	var last edgeStartAddrs
	if json.Unmarshal(data, &last) != nil {
		return false
	}
	used := false
	if !cmd.Flags().Changed("http-addr") && last.HTTPAddr != "" && last.HTTPAddr != f.httpAddr {
		f.httpAddr, used = last.HTTPAddr, true
	}
	if !cmd.Flags().Changed("admin-addr") && last.AdminAddr != "" && last.AdminAddr != f.adminAddr {
		f.adminAddr, used = last.AdminAddr, true
	}
	if d := time.Duration(last.Drain * float64(time.Second)); !cmd.Flags().Changed("drain-timeout") && d > 0 {
		f.drain = d
	}
	if f.tls.resolve(cmd, last.edgeStartTLS) {
		used = true
	}
	f.access.resolve(cmd, last.edgeStartAccess)
	return used
}

// remember records the addresses of a successful start (best effort).
func (f *edgeContainerFlags) remember(stateDir string) {
	last := edgeStartAddrs{HTTPAddr: f.httpAddr, AdminAddr: f.adminAddr, edgeStartTLS: f.tls.remembered(), edgeStartAccess: f.access.remembered()}
	if f.drain != defaultEdgeDrain {
		last.Drain = f.drain.Seconds()
	}
	data, err := json.Marshal(last)
	dir := filepath.Join(stateDir, "edge")
	if err == nil && os.MkdirAll(dir, 0o700) == nil {
		_ = writeFileAtomic(filepath.Join(dir, edgeStartFile), append(data, '\n'))
	}
}

// printEdgeAddr says where the edge listens (and that the address is the
// last start's when no flag gave it).
func printEdgeAddr(w io.Writer, f edgeContainerFlags, remembered bool) {
	fmt.Fprintf(w, "gordon-edge: HTTP on %s, admin on %s", f.httpAddr, f.adminAddr)
	if f.tls.httpsAddr != "" {
		fmt.Fprintf(w, ", HTTPS on %s", f.tls.httpsAddr)
	}
	if remembered {
		fmt.Fprint(w, " (as at the last start; --http-addr/--admin-addr change them)")
	}
	fmt.Fprintln(w)
}

// newEdgeContainerCommands returns `edge start`, `edge stop` and `edge logs`.
func newEdgeContainerCommands(env *cliEnv) []*cobra.Command {
	var flags edgeContainerFlags
	watch := true
	start := &cobra.Command{
		Use:   "start",
		Short: "Run gordon-edge as a Docker-managed system container (host network, restart unless-stopped)",
		Long: `Build the image gordon-system/edge:<hash> locally FROM scratch from the
installed gordon-edge binary and run it as the container gordon-edge on the
host network with restart policy unless-stopped and the state directory
bind-mounted at the same path, so it comes back after an engine restart or a
reboot. Beside it runs gordon-reconcile as "reconcile --watch" (--watch=false:
not): it follows the engine's container events and re-routes an instance the
engine restarts, within about a second, so apps answer at their new addresses
after an engine restart or a reboot. system start's gordon-reconcile also
starts stopped apps at boot; when it runs, edge start leaves it alone.
Idempotent: a running container with the same binary and flags is
left alone; a different binary or flags replace it without a gap: the new
edge starts beside the old one (as gordon-edge-next), takes its listening
sockets over, the old one drains its in-flight requests and streams
(--drain-timeout) and exits, and the new one is renamed gordon-edge.

Metrics: GET http://<admin-addr>/metrics with "Authorization: Bearer
<token>", the token in <state>/edge/admin.token (Prometheus text;
--admin-addr, default 127.0.0.1:9180; keep it on loopback): gordon_edge_http_requests_total
{app,service,backend,code}, gordon_edge_http_request_duration_seconds,
gordon_edge_http_in_flight_requests, gordon_edge_http_proxy_errors_total
{app,service,backend,status}, gordon_edge_http_unrouted_requests_total,
gordon_edge_held, gordon_edge_applied_generation and the TLS series. The
README lists them; edge run picks a free loopback port unless given one.

Access log: one JSON line per HTTP request (time, host, method, path,
status, duration_ms, bytes_out, app, service, instance, client, request_id,
protocol), on by default on the edge's stdout: edge logs --access shows
them, docker gordon logs APP --access one app's. --access-log off turns it
off; --access-log FILE (under the state directory) writes a file rotated at
--access-log-max-size bytes, keeping --access-log-keep old files.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env.platform().OnSwarm() {
				return fmt.Errorf("this state directory serves a swarm: its edge is the global service gordon-edge; use docker gordon system start (or system status): %w", core.ErrConflict)
			}
			remembered := flags.resolve(cmd, env.opts.stateDir)
			u, err := edgeUnit(env.opts.stateDir, flags.httpAddr, flags.adminAddr, flags.drain)
			if err != nil {
				return err
			}
			if err := withEdgeTLS(&u, &flags.tls, env.opts.stateDir); err != nil {
				return err
			}
			if err := withEdgeAccessLog(&u, &flags.access, env.opts.stateDir); err != nil {
				return err
			}
			if err := system.EnsureStateDir(env.opts.stateDir); err != nil {
				return err
			}
			r, err := docker.Ensure(cmd.Context(), env.dockerCli.Client(), u)
			if err != nil {
				return err
			}
			flags.remember(env.opts.stateDir)
			system.PrintStart(env.dockerCli.Out(), u.Name, r)
			if watch {
				err = system.EnsureEdgeWatcher(cmd.Context(), env.sysEnv())
			} else {
				err = system.StopEdgeWatcher(cmd.Context(), env.sysEnv())
			}
			if err != nil {
				return err
			}
			printEdgeAddr(env.dockerCli.Out(), flags, remembered)
			return nil
		},
	}
	flags.register(start)
	start.Flags().BoolVar(&watch, "watch", true, "also run gordon-reconcile (reconcile --watch), which re-routes instances the engine restarts or moves")

	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop and remove the gordon-edge system container (and edge start's watcher)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := system.StopEdgeWatcher(cmd.Context(), env.sysEnv()); err != nil {
				return err
			}
			return system.StopContainer(cmd.Context(), env.sysEnv(), docker.EdgeName, 35*time.Second)
		},
	}

	return []*cobra.Command{start, stop, newEdgeLogsCommand(env)}
}

// newSystemLogsCommand is `logs [-f] [--tail N]` for the container chosen
// by pick from the arguments.
func newSystemLogsCommand(env *cliEnv, use, short string, pick func(arg string) (string, error), args cobra.PositionalArgs) *cobra.Command {
	var follow bool
	var tail string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, a []string) error {
			arg := ""
			if len(a) > 0 {
				arg = a[0]
			}
			name, err := pick(arg)
			if err != nil {
				return err
			}
			if tail != "all" {
				if n, err := strconv.Atoi(tail); err != nil || n < 0 {
					return fmt.Errorf("--tail %q: a number of lines or \"all\": %w", tail, core.ErrInvalid)
				}
			}
			return docker.Logs(cmd.Context(), env.dockerCli.Client(), name, follow, tail, env.dockerCli.Out(), env.dockerCli.Err())
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log output")
	cmd.Flags().StringVar(&tail, "tail", "all", "number of lines to show from the end of the logs")
	return cmd
}

// writeFileAtomic replaces path with data (mode 0644): a reader sees the
// old or the new content, never a mix (the CLI's own remembered flags and
// caches; the edge's files are the traffic backend's).
func writeFileAtomic(path string, data []byte) error {
	return maybe.WriteFile(path, data, 0o644)
}
