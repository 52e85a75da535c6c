// Command gordon-edge is the edge proxy of docker gordon (ARCHITECTURE §1,
// §5): `gordon-edge run --state-dir DIR --http-addr ADDR [--admin-addr
// ADDR] [--https-addr ADDR [--acme-email E] [--acme-ca URL]
// [--acme-ca-root FILE] [--acme=false]] [--trusted-proxies CIDRS]
// [--read-header-timeout D] [--reuse-port] [--pprof] [--no-handover]
// [--relay-max-conns N] [--relay-fd-reserve N]
// [--on-demand-ask URL] [--on-demand-max-pending N] [--on-demand-per-hour N]
// [--access-log off|stdout|FILE [--access-log-max-size N] [--access-log-keep N]]
// [--routes-token-file FILE [--peers NAME [--peer-interval D]]
// [--cert-storage URL]]`
// serves in the foreground until SIGTERM or SIGINT, then drains (in-flight
// requests finish within --shutdown-timeout) and stops; SIGHUP re-reads the
// route table. The admin address answers GET /healthz to anyone and every
// other request (/status, /metrics, POST /reload, /debug/pprof/) only with
// "Authorization: Bearer <token>", the token in <state>/edge/admin.token
// (made at the first start, mode 0600; the routes token works too), even
// on loopback. Every HTTP request is logged as one JSON line on stdout
// (the default --access-log; hclog lines go to stderr). A second edge started on the same state directory takes the
// listeners over from the running one through <state>/edge/handover.sock,
// which then drains and exits (SPEC R60); `gordon-edge version` prints the
// version.
//
// On a swarm (docs/edge.md "Route table pushed over the admin
// endpoint") the edge cannot read the publisher's state directory: with a
// routes token (--routes-token-file FILE, the token is the file's content
// with surrounding white space trimmed; else the environment's
// GORDON_EDGE_ROUTES_TOKEN) the admin address also serves PUT /routes (a
// routetable.Table JSON body, written as <state>/edge/routes.json and
// applied; 200 with the status, 409 for a lower generation, 401 without
// the token, 413 over 16 MiB) and GET /routes[?after=N] (the applied
// table; 204 when not newer than N, 404 when none), and --admin-addr may
// be a non-loopback address (without a token it must be loopback).
// --peers NAME (requires the token) resolves NAME every --peer-interval
// (default 1s) and adopts a newer table from any other edge at it (GET
// /routes?after=<applied> on this edge's admin port, 1 s bound).
// --cert-storage URL (requires the token, its bearer token) keeps the
// ACME certificates in the certificate storage every edge of the swarm
// shares (a certshare server: `docker gordon reconcile
// --cert-storage-addr` on the manager), so one edge orders each name and
// any edge answers its HTTP-01 challenge, and mirrors the storage's
// static certificates into this edge's state directory (at start, after
// each route table apply, every 10 s).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// version is stamped by the Makefile (-X main.version=…).
var version = "dev"

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gordon-edge:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "gordon-edge",
		Short:         "Edge proxy of docker gordon: HTTP by Host, TCP by port",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCommand(), newVersionCommand(), newCopySecretCommand(), newVolumeHelperCommand())
	return root
}

type runOptions struct {
	onDemandAsk        string
	onDemandMaxPending int
	onDemandPerHour    int
	relayMaxConns      int
	relayFDReserve     int
	stateDir           string
	httpAddr           string
	adminAddr          string
	logLevel           string
	shutdownTimeout    time.Duration
	trustedProxies     string
	readHeader         time.Duration
	pprof              bool
	reusePort          bool
	eventLoops         int
	noHandover         bool
	httpsAddr          string
	acme               bool
	acmeEmail          string
	acmeCA             string
	acmeCARoot         string
	defaultCert        string
	accessLog          string
	accessLogMax       int64
	accessLogKeep      int
	routesTokenFile    string
	peers              string
	peerInterval       time.Duration
	dialTimeout        time.Duration
	certStorage        string
	controlFile        string
}

func newRunCommand() *cobra.Command {
	var opts runOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Serve in the foreground until SIGTERM/SIGINT",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEdge(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.stateDir, "state-dir", defaultStateDir(), "gordon state directory (env GORDON_STATE_DIR)")
	f.StringVar(&opts.httpAddr, "http-addr", "", "public HTTP listen address, e.g. :80 (required)")
	f.StringVar(&opts.adminAddr, "admin-addr", "127.0.0.1:0", "admin address (GET /metrics, /status, /healthz; all but /healthz need the bearer token in <state>/edge/admin.token); loopback unless a routes token is set; CIDR:PORT binds this container's address inside CIDR only (a swarm's control network), and --peers then asks only peers inside it")
	f.StringVar(&opts.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	f.DurationVar(&opts.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long in-flight requests may finish on shutdown")
	f.StringVar(&opts.trustedProxies, "trusted-proxies", "", "comma-separated CIDRs or IPs of proxies in front of the edge whose Forwarded/X-Forwarded-* headers are kept, and past which an interface's allow list takes the client address from X-Forwarded-For (default: none, the chain is replaced)")
	f.DurationVar(&opts.readHeader, "read-header-timeout", 10*time.Second, "how long a client may take to send request headers (slowloris guard)")
	f.BoolVar(&opts.pprof, "pprof", false, "serve net/http/pprof on the admin address")
	f.IntVar(&opts.eventLoops, "event-loops", 0, "event loop threads serving simple HTTP requests (Linux): 0 picks one per four CPUs, -1 serves every connection from a goroutine")
	f.BoolVar(&opts.reusePort, "reuse-port", false, "bind the HTTP address with SO_REUSEPORT so a new edge can start before the old one stops (graceful restart, Linux)")
	f.BoolVar(&opts.noHandover, "no-handover", false, "neither take the listeners of an edge already serving the state directory nor offer them to the next one (<state>/edge/handover.sock)")
	f.StringVar(&opts.httpsAddr, "https-addr", "", "public HTTPS listen address, e.g. :443 (optional; HTTP/2 and HTTP/1.1, certificates from ACME and docker gordon certs add)")
	f.BoolVar(&opts.acme, "acme", true, "obtain certificates with ACME for routed hosts (false: only certificates added with docker gordon certs add)")
	f.StringVar(&opts.acmeEmail, "acme-email", "", "ACME account contact email")
	f.StringVar(&opts.acmeCA, "acme-ca", "", "ACME directory URL (default Let's Encrypt production)")
	f.StringVar(&opts.defaultCert, "default-cert", "", "host whose certificate a TLS client that sends no server name (SNI) gets (default: the only certificate served, when there is one)")
	f.StringVar(&opts.acmeCARoot, "acme-ca-root", "", "PEM file of the root to trust for the ACME server (private CAs, tests)")
	f.StringVar(&opts.accessLog, "access-log", edgeproxy.AccessLogStdout, "access log, one JSON line per HTTP request (time, host, method, path, status, duration_ms, bytes_out, app, service, instance, client, request_id, protocol): off, stdout, or a file path rotated by size")
	f.Int64Var(&opts.accessLogMax, "access-log-max-size", edgeproxy.DefaultAccessLogMaxSize, "size in bytes at which an --access-log file is rotated (FILE becomes FILE.1)")
	f.IntVar(&opts.accessLogKeep, "access-log-keep", edgeproxy.DefaultAccessLogKeep, "rotated --access-log files kept (FILE.1 .. FILE.N)")
	f.StringVar(&opts.routesTokenFile, "routes-token-file", "", "file holding the routes token (else env "+routesTokenEnv+"): serves PUT /routes and GET /routes on the admin address to \"Authorization: Bearer <token>\", and lets --admin-addr be non-loopback (swarm)")
	f.StringVar(&opts.peers, "peers", "", "DNS name of every edge's admin address (e.g. tasks.gordon-edge; needs the routes token): adopt a newer route table from any of them (GET /routes?after=N on this edge's admin port)")
	f.DurationVar(&opts.peerInterval, "peer-interval", time.Second, "how often --peers are asked for a newer route table")
	f.DurationVar(&opts.dialTimeout, "dial-timeout", 5*time.Second, "how long dialing a backend may take before the request is retried on another instance and the backend ejected (a route's own dial timeout wins); on a swarm the edge uses 1s: a task on a lost node answers nothing")
	f.StringVar(&opts.onDemandAsk, "on-demand-ask", "", "URL asked GET URL?domain=NAME before a certificate is ordered for a name under a routed wildcard: only a 200 lets the order start (as Caddy's on_demand_tls ask)")
	f.IntVar(&opts.onDemandMaxPending, "on-demand-max-pending", 0, "on-demand certificate orders (names under a routed wildcard) under way at once (0: 10)")
	f.IntVar(&opts.onDemandPerHour, "on-demand-per-hour", 0, "on-demand certificate orders that may start an hour (0: 30)")
	f.IntVar(&opts.relayMaxConns, "relay-max-conns", 0, "bound on every relayed TCP connection and UDP session together (0: 4000); a route's own bound is its interface's max_conns")
	f.IntVar(&opts.relayFDReserve, "relay-fd-reserve", 0, "open-file descriptors the TCP/UDP relays leave to HTTP and the edge (0: a quarter of the limit, at least 256)")
	f.StringVar(&opts.certStorage, "cert-storage", "", "URL of the certificate storage every edge of a swarm shares (e.g. http://gordon-reconcile:9190, served by docker gordon reconcile --cert-storage-addr; needs the routes token): one edge orders each certificate, any edge answers its HTTP-01 challenge, static certificates are mirrored from it")
	f.StringVar(&opts.controlFile, "control-file", "", "file of a swarm edge's control credentials (its Docker secret, JSON: push token hashes, edge tokens, the control CA and this edge's certificate): replaces the routes token; the admin address serves TLS, the peers and --cert-storage are asked over TLS with the CA pinned, and PUT /control takes newer credentials from the manager")
	_ = cmd.MarkFlagRequired("http-addr")
	return cmd
}

func runEdge(ctx context.Context, opts runOptions) error {
	if opts.stateDir == "" {
		return fmt.Errorf("--state-dir is required (no GORDON_STATE_DIR and no home directory)")
	}
	trusted, err := edgeproxy.ParseTrustedProxies(opts.trustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	acme := edgeproxy.ACMEConfig{Disabled: !opts.acme, Email: opts.acmeEmail, CA: opts.acmeCA,
		OnDemandAsk: opts.onDemandAsk, OnDemandMaxPending: opts.onDemandMaxPending, OnDemandPerHour: opts.onDemandPerHour}
	if opts.acmeCARoot != "" {
		b, err := os.ReadFile(opts.acmeCARoot)
		if err != nil {
			return fmt.Errorf("--acme-ca-root: %w", err)
		}
		acme.CARootPEM = b
	}
	accessLog, err := edgeproxy.OpenAccessLog(opts.accessLog, opts.accessLogMax, opts.accessLogKeep)
	if err != nil {
		return fmt.Errorf("--access-log: %w", err)
	}
	var accessOut io.Writer
	if accessLog != nil {
		defer accessLog.Close()
		accessOut = accessLog
	}
	token, err := routesToken(opts.routesTokenFile)
	if err != nil {
		return err
	}
	adminAddr, peerLookup, err := controlAddr(ctx, opts.adminAddr)
	if err != nil {
		return fmt.Errorf("--admin-addr: %w", err)
	}
	edgeDir := filepath.Join(opts.stateDir, "edge")
	if err := os.MkdirAll(edgeDir, 0o700); err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	adminToken, err := edgestate.EnsureAdminToken(edgeDir)
	if err != nil {
		return err
	}
	ctl, err := loadControl(opts.controlFile, edgeDir)
	if err != nil {
		return err
	}
	tuneGC()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "gordon-edge",
		Level:  hclog.LevelFromString(opts.logLevel),
		Output: os.Stderr,
	})
	// SIGHUP re-reads the route table (R61); SIGTERM/SIGINT drain and stop.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	srv := edgeproxy.New(edgeproxy.Config{
		StateDir:          opts.stateDir,
		HTTPAddr:          opts.httpAddr,
		HTTPSAddr:         opts.httpsAddr,
		ACME:              acme,
		AdminAddr:         adminAddr,
		Logger:            logger,
		ShutdownTimeout:   opts.shutdownTimeout,
		ReadHeaderTimeout: opts.readHeader,
		TrustedProxies:    trusted,
		ContainerNets:     edgeproxy.DetectContainerNets,
		Pprof:             opts.pprof,
		ReusePort:         opts.reusePort,
		EventLoops:        opts.eventLoops,
		NoHandover:        opts.noHandover,
		DefaultCertHost:   opts.defaultCert,
		AccessLog:         accessOut,
		AccessLogName:     opts.accessLog,
		RoutesToken:       token,
		AdminToken:        adminToken,
		Peers:             opts.peers,
		PeerInterval:      opts.peerInterval,
		PeerLookup:        peerLookup,
		DialTimeout:       opts.dialTimeout,
		RelayMaxConns:     opts.relayMaxConns,
		RelayFDReserve:    opts.relayFDReserve,
		CertStorage:       opts.certStorage,
		Control:           ctl,
	})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				logger.Info("SIGHUP: re-reading the route table")
				srv.Reload()
			}
		}
	}()
	return srv.Run(ctx)
}

// routesTokenEnv holds the routes token itself when no
// --routes-token-file is given.
const routesTokenEnv = "GORDON_EDGE_ROUTES_TOKEN"

// routesToken is the routes token: the content of file (surrounding white
// space trimmed) when file is set, else routesTokenEnv's value ("": no
// token). An unreadable or empty file is an error.
func routesToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(routesTokenEnv)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--routes-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--routes-token-file: %s is empty", file)
	}
	return tok, nil
}

// tuneGC sets a soft memory limit of 256 MiB (unless GOMEMLIMIT is set),
// so a burst cannot grow the heap without bound. GOGC stays at its default:
// a higher value bought ~2 % throughput for twice the RSS in the edge benchmark.
func tuneGC() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(256 << 20)
	}
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "gordon-edge", version)
		},
	}
}

// defaultStateDir follows ARCHITECTURE §3: GORDON_STATE_DIR, else
// /var/lib/docker-gordon for root, else $XDG_STATE_HOME/docker-gordon
// (default ~/.local/state/docker-gordon).
func defaultStateDir() string {
	if d := os.Getenv("GORDON_STATE_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/lib/docker-gordon"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "docker-gordon")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "docker-gordon")
	}
	return ""
}
