package main

// The CLI side of the system containers: the flags of `edge start` and
// `system start` and the edge start|stop commands. The flows are
// system's (StartEdge, Start, StopEdge, Stop).

import (
	"fmt"
	"io"
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

// registerEdgeFlags registers the flags of `edge start` and `system
// start` into o (system.EdgeOptions.Resolve fills those not given from the
// last start).
func registerEdgeFlags(cmd *cobra.Command, o *system.EdgeOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.HTTPAddr, "http-addr", ":80", "public HTTP listen address of the edge (host network); default: the last start's, else :80")
	fl.StringVar(&o.AdminAddr, "admin-addr", "127.0.0.1:9180", "loopback admin address of the edge (GET /metrics, edge status); default: the last start's")
	fl.DurationVar(&o.Drain, "drain-timeout", system.DefaultEdgeDrain, "how long a stopping or upgraded edge lets in-flight requests and streams (SSE, WebSocket, TCP relays) run before it cuts them; default: the last start's")
	registerTLSFlags(cmd, &o.TLS)
	fl.StringVar(&o.Access.Dest, "access-log", system.AccessLogStdout, "the edge's access log, one JSON line per HTTP request: off, stdout (read with edge logs --access), or a file under the state directory, rotated by size; default: the last start's")
	fl.Int64Var(&o.Access.MaxSize, "access-log-max-size", system.DefaultAccessLogMaxSize, "size in bytes at which an --access-log file is rotated (FILE becomes FILE.1)")
	fl.IntVar(&o.Access.Keep, "access-log-keep", system.DefaultAccessLogKeep, "rotated --access-log files kept (FILE.1 .. FILE.N)")
}

// registerTLSFlags registers the HTTPS flags of `edge run`, `edge start`
// and `system start` (passed to gordon-edge run; SPEC R62) into o.
func registerTLSFlags(cmd *cobra.Command, o *system.TLSOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.HTTPSAddr, "https-addr", "", "public HTTPS listen address, e.g. :443 (HTTP/2 and HTTP/1.1; certificates by ACME and docker gordon certs add); default: the last start's, else none")
	fl.StringVar(&o.ACMEEmail, "acme-email", "", "ACME account contact email")
	fl.StringVar(&o.ACMECA, "acme-ca", "", "ACME directory URL (default Let's Encrypt production; a staging URL works the same)")
	fl.StringVar(&o.ACMECARoot, "acme-ca-root", "", "PEM file of the root to trust for the ACME server (private CAs, tests)")
	fl.BoolVar(&o.NoACME, "no-acme", false, "obtain no certificates: serve only those added with docker gordon certs add (remembered; a later start with an --acme-* flag, or --no-acme=false, obtains them again)")
}

// newEdgeContainerCommands returns `edge start`, `edge stop` and `edge logs`.
func newEdgeContainerCommands(env *cliEnv) []*cobra.Command {
	var o system.EdgeOptions
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
docs/operations.md lists them; edge run picks a free loopback port unless given one.

Access log: one JSON line per HTTP request (time, host, method, path,
status, duration_ms, bytes_out, app, service, instance, client, request_id,
protocol), on by default on the edge's stdout: edge logs --access shows
them, docker gordon logs APP --access one app's. --access-log off turns it
off; --access-log FILE (under the state directory) writes a file rotated at
--access-log-max-size bytes, keeping --access-log-keep old files.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return system.StartEdge(cmd.Context(), env.sysEnv(), &o, cmd.Flags().Changed, watch)
		},
	}
	registerEdgeFlags(start, &o)
	start.Flags().BoolVar(&watch, "watch", true, "also run gordon-reconcile (reconcile --watch), which re-routes instances the engine restarts or moves")

	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop and remove the gordon-edge system container (and edge start's watcher)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return system.StopEdge(cmd.Context(), env.sysEnv())
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
