package edgeproxy

import (
	"cmp"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certshare"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/control"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/l4"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/routepush"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/wake"
)

// File names inside <state>/edge.
const (
	RoutesFile = edgestate.RoutesFile
	StatusFile = edgestate.StatusFile
	// AppliedFile is the last table the edge applied, restored at start
	// when routes.json is bad.
	AppliedFile = "applied.json"
)

// fullRereadEvery bounds how long a change invisible to stat (same mtime,
// size and inode) can stay unnoticed.
const fullRereadEvery = 2 * time.Second

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// StateDir is the gordon state directory (required); the edge reads
	// StateDir/edge/routes.json and writes StateDir/edge/status.json.
	StateDir string
	// HTTPAddr is the public HTTP listen address, e.g. ":80" (required).
	HTTPAddr string
	// HTTPSAddr is the public HTTPS listen address, e.g. ":443" (optional;
	// "" serves plain HTTP only). See tls.go.
	HTTPSAddr string
	// HTTPSListener, when set, is served as the HTTPS listener instead of
	// binding HTTPSAddr (a listener inherited from the edge being
	// replaced; HTTPSAddr must still be non-empty). Certificates need no
	// hand-over: both stores are files the new edge loads at start.
	HTTPSListener net.Listener
	// DefaultCertHost names the host whose certificate a TLS client that
	// sends no server name (SNI: clients by IP address, health checkers)
	// is served; "" serves the only certificate being served when there
	// is exactly one, and fails such a handshake otherwise.
	DefaultCertHost string
	// ACME configures certificate issuance for HTTPSAddr.
	ACME ACMEConfig
	// AdminAddr is the admin listen address (GET /status, /healthz).
	// Default "127.0.0.1:0"; the bound address is written to status.json
	// as admin_addr. It must be a loopback address (or "localhost")
	// unless RoutesToken is set: Run refuses any other.
	AdminAddr string
	// RoutesToken, when set, serves PUT /routes and GET /routes on the
	// admin address to requests carrying "Authorization: Bearer
	// <RoutesToken>" (the route table pushed over the admin endpoint,
	// internal/routepush; routepush.go) and lets AdminAddr be any address.
	// "": neither endpoint exists (404).
	RoutesToken string
	// AdminToken, when set, is the bearer token every admin request but
	// GET /healthz must carry ("Authorization: Bearer <token>"), even on
	// loopback: /status, /metrics, POST /reload and /debug/pprof/ answer
	// 401 without it. RoutesToken is accepted in its place (the swarm
	// publisher holds that one); AdminToken never authorizes /routes.
	// gordon-edge run sets it from <state>/edge/admin.token
	// (edgestate.EnsureAdminToken). "" with RoutesToken set: RoutesToken
	// is required the same way; "" with neither: no admin authentication
	// (loopback only).
	AdminToken string
	// Control, when set (a swarm edge), replaces RoutesToken with split
	// credentials (package control): a push token pushes and opens the
	// admin endpoints, an edge token pulls from the peers and the
	// certificate storage, PUT /control takes newer credentials, the
	// admin address serves TLS, and the peers and the storage are asked
	// over TLS with the control CA pinned.
	Control *control.Keyring
	// Peers is a DNS name resolving to every edge task's admin address
	// (e.g. "tasks.gordon-edge" on a swarm; requires RoutesToken). Every
	// PeerInterval (default 1 s) the edge asks each peer but itself for a
	// newer table (GET /routes?after=<applied generation>, 1 s bound) and
	// adopts the newest as a PUT would. "": no peer is asked.
	Peers        string
	PeerInterval time.Duration
	// FirstTableWait (with Peers; default 3 s) bounds how long after New
	// a request for a host no route matches waits for the edge's first
	// route table instead of a 404 (dataplane.FirstTable).
	FirstTableWait time.Duration
	// PeerLookup resolves Peers (tests): addresses "ip" (the peer's admin
	// port is this edge's own) or "ip:port". nil: DNS A/AAAA records.
	PeerLookup func(ctx context.Context, name string) ([]string, error)
	// Logger defaults to a null logger.
	Logger hclog.Logger
	// PollInterval is the route table stat interval (default 150 ms).
	PollInterval time.Duration
	// DialTimeout bounds dialing a backend (default 5 s).
	DialTimeout time.Duration
	// ShutdownTimeout bounds the graceful HTTP shutdown when Run's context
	// ends (default 30 s); requests still running after it are cut.
	ShutdownTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's headers on the public
	// listener (default 10 s): a client trickling headers (slowloris) is
	// cut off. There is no write timeout: responses stream as long as the
	// backend sends.
	ReadHeaderTimeout time.Duration
	// TrustedProxies are the peers whose Forwarded / X-Forwarded-* chain is
	// kept and extended; from any other peer the chain is replaced (see
	// ParseTrustedProxies). Default: none.
	TrustedProxies []netip.Prefix
	// ContainerNets returns the networks app containers have addresses
	// on (DetectContainerNets for gordon-edge run). Such a network lying
	// strictly inside a TrustedProxies entry (or a block of Docker's
	// address pools: policy.DockerPools) is not trusted, and one lying
	// strictly inside a route's allow entry is not admitted by it; an
	// entry inside a container network (naming it) is kept. Called at New
	// and at every table apply. nil: no container networks.
	ContainerNets func() []netip.Prefix
	// ReusePort binds the public HTTP listener with SO_REUSEPORT (Linux),
	// for a graceful restart: start the new edge on the same address, then
	// SIGTERM the old one, which stops accepting and lets its in-flight
	// requests finish (ShutdownTimeout) while the new one takes every new
	// connection. Connections still queued, unaccepted, on the old socket
	// when it closes are reset by the kernel (rare; clients retry).
	ReusePort bool
	// Pprof serves net/http/pprof under /debug/pprof/ on the admin address
	// (profiling the hot path; off by default).
	Pprof bool
	// ResponseTimeout bounds the wait for a backend's response headers once
	// the request was sent, for routes whose table entry sets no
	// response_header_timeout_ms (default 60 s; then 504). A response whose
	// headers came is never cut by it (streams, downloads).
	ResponseTimeout time.Duration
	// BodyTimeout bounds the idle time between a request body's bytes
	// (default 60 s): a client that stops sending its body gets 408 and
	// the connection closes, and the backend connection is closed.
	BodyTimeout time.Duration
	// BackendIdleTimeout closes a kept-alive backend connection idle for
	// this long (default 90 s); idle connections are swept every
	// PollInterval, not only when a request looks for one.
	BackendIdleTimeout time.Duration
	// EjectBase is how long passive health first ejects an instance that
	// failed (a connect failure, a reset before any response byte, a
	// response header timeout; SPEC R21), EjectMax the cap of the
	// doubling on repeated ejections (0: 10 s and 80 s).
	EjectBase, EjectMax time.Duration
	// UDPIdleTimeout expires a UDP client session after this long without a
	// datagram in either direction (default 30 s).
	UDPIdleTimeout time.Duration
	// UDPMaxSessions bounds each UDP listener's client sessions (default
	// DefaultUDPMaxSessions); UDPMaxSessionsPerSource one source IP's
	// (default DefaultUDPMaxSessionsPerSource). A new session over the
	// listener bound closes the least recently active one; over the source
	// bound its datagram is dropped. All sessions together use at most half
	// of the process's descriptor limit, so HTTP never runs out.
	UDPMaxSessions          int
	UDPMaxSessionsPerSource int
	// RelayMaxConns bounds every relayed TCP connection and UDP session
	// together (0: DefaultRelayMaxConns, 4000). RelayFDReserve is how
	// many of the process's descriptors the relays leave to HTTP and the
	// edge itself (0: a quarter of the limit, at least 256): relays use
	// at most the limit less the reserve, two per TCP connection, one per
	// UDP session. A TCP connection over a bound, or over its route's
	// max_conns (default 2000), is closed at accept; a TCP connection
	// silent both ways for its route's idle_timeout (default 50 s) is
	// closed.
	RelayMaxConns  int
	RelayFDReserve int
	// EventLoops is how many event loop threads serve the public HTTP
	// listener's simple requests (Linux; internal/dataplane). 0: the
	// environment's GORDON_EDGE_EVENT_LOOPS if set, else one per four
	// CPUs, at least one; negative: none, a goroutine per connection.
	EventLoops int
	// AccessLog receives the access log, one JSON line per HTTP request
	// (fields: internal/accesslog; nil: no access log). Lines are buffered and
	// flushed every 500 ms and when Run returns; the writer stays the
	// caller's to close. OpenAccessLog opens "stdout" or a rotated file.
	AccessLog io.Writer
	// AccessLogName names AccessLog's destination in status.json
	// ("stdout" or the file's path), so the CLI can read it.
	AccessLogName string
	// CertStorage, when set, is the URL of the certificate storage every
	// edge of a swarm shares (a certshare server, e.g.
	// "http://gordon-reconcile:9190"; edgeproxy/certshare): certmagic
	// stores accounts, certificates, locks and challenge tokens there (one
	// edge orders a name, any edge answers its HTTP-01 challenge), and the
	// server's static certificates are mirrored into StateDir's certs
	// (certshare.go). It needs RoutesToken, its bearer token: Run refuses
	// it without one. "": the local <state>/edge/certs only.
	CertStorage string
	// CertStorageClient is the HTTP client to CertStorage (nil: one with a
	// 60 s request bound).
	CertStorageClient *http.Client
	// NoHandover turns the listener hand-over off (SPEC R60): Run neither
	// takes the listeners of an edge already serving StateDir nor offers
	// its own on <state>/edge/handover.sock.
	NoHandover bool
}

// DefaultResponseTimeout is the response header timeout of a route that
// sets none (Config.ResponseTimeout).
const DefaultResponseTimeout = 60 * time.Second

// hostCacheEntries bounds the host cache (wildcard matches and unknown
// hosts); an entry costs a few dozen bytes.
const hostCacheEntries = 10000

// Server is the edge proxy. It is an http.Handler (the public router).
// Create it with New, start it with Run.
type Server struct {
	dataplane.Core
	cfg Config

	tcp *l4.TCPRelays
	udp *l4.UDPRelays
	// wakes are the wake requests of sleeping services, activity when
	// traffic last reached each routed service (SPEC R81).
	wakes    *wake.Board
	activity wake.Activity
	// auth checks basic-auth passwords (internal/policy, SPEC R73).
	auth *policy.Verifier
	// h2Stalled counts the HTTP/2 streams of every connection waiting for
	// send window (h2MaxStalled).
	h2Stalled atomic.Int64
	// tls is the HTTPS side (tls.go); nil without HTTPSAddr.
	tls       *tlsEdge
	httpsAddr atomic.Pointer[string]

	// socks are the listening sockets by name, for the hand-over.
	socks *listenerSet
	// handedOver is closed once a new edge took the listeners over.
	handedOver   chan struct{}
	handoverOnce sync.Once
	// acceptStopped is closed once this edge accepts nothing any more
	// (stopAccepting after a hand-over, or the end of Run): the hand-over
	// socket's EOF, on which the new edge reports ready, waits for it.
	acceptStopped     chan struct{}
	acceptStoppedOnce sync.Once
	// firstTable: a request for an unknown host waits for the first table.
	firstTable *dataplane.FirstTable
	// stopAcceptHook, when set (tests), runs when a handed-over edge is
	// about to stop accepting.
	stopAcceptHook func()

	startedAt time.Time
	ready     chan struct{}
	// reload queues an immediate route table read (admin POST /reload).
	reload    chan struct{}
	reloaded  reloadWaiters // POST /reload callers awaiting the read (reload.go)
	httpAddr  atomic.Pointer[string]
	adminAddr atomic.Pointer[string]

	// push serves the pushed route table (routepush.go); nil without
	// RoutesToken.
	push *routepush.Pusher

	// certShare is the shared certificate storage (certshare.go); nil
	// without CertStorage. certShareNow asks its loop for a mirror now;
	// certShareErr is the last mirror error logged (the loop's).
	certShare    *certshare.Client
	certShareNow chan struct{}
	certShareErr string

	// applyMu serializes applies and status writes.
	applyMu     sync.Mutex
	lastErr     string
	rejectedGen uint64
}

var _ http.Handler = (*Server)(nil)

// firstTableWait is how long a request for an unknown host may wait for
// the first table: Config.FirstTableWait (default 3 s) with Peers, none
// without.
func firstTableWait(cfg Config) time.Duration {
	if cfg.Peers == "" {
		return 0
	}
	return cmp.Or(cfg.FirstTableWait, 3*time.Second)
}

// setDefaults fills in the zero fields New gives a default.
func (c *Config) setDefaults() {
	if c.AdminAddr == "" {
		c.AdminAddr = "127.0.0.1:0"
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 150 * time.Millisecond
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.ResponseTimeout <= 0 {
		c.ResponseTimeout = DefaultResponseTimeout
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = 60 * time.Second
	}
	if c.BackendIdleTimeout <= 0 {
		c.BackendIdleTimeout = dataplane.DefaultBackendIdleTimeout
	}
	if c.UDPIdleTimeout <= 0 {
		c.UDPIdleTimeout = 30 * time.Second
	}
	if c.EventLoops == 0 {
		c.EventLoops, _ = strconv.Atoi(os.Getenv("GORDON_EDGE_EVENT_LOOPS"))
	}
}

// New returns a Server for cfg. It binds nothing until Run.
func New(cfg Config) *Server {
	cfg.setDefaults()
	narrowTrusted(&cfg)
	s := &Server{
		cfg:       cfg,
		Core:      dataplane.Core{Logger: cfg.Logger},
		startedAt: time.Now().UTC(),
		ready:     make(chan struct{}),
		reload:    make(chan struct{}, 1),

		certShareNow: make(chan struct{}, 1),

		socks:         newListenerSet(),
		handedOver:    make(chan struct{}),
		acceptStopped: make(chan struct{}),
		firstTable:    dataplane.NewFirstTable(firstTableWait(cfg)),
	}
	s.Metrics = dataplane.NewMetrics()
	if cfg.AccessLog != nil {
		s.Metrics.Access = dataplane.NewAccessLog(cfg.AccessLog, cfg.TrustedProxies)
		watchAccessLog(s.Metrics.Reg, s.Metrics.Access.Log, cfg.Logger, cfg.AccessLogName)
	}
	s.auth = policy.NewVerifier()
	s.Reg = dataplane.NewRegistry(cfg.DialTimeout, cfg.TrustedProxies, cfg.Logger)
	s.Reg.DefaultTM = upstream.Timeouts{ResponseHeader: cfg.ResponseTimeout}
	s.Reg.IdleTimeout = cfg.BackendIdleTimeout
	if cfg.EjectBase > 0 {
		s.Reg.EjectBase = cfg.EjectBase
	}
	if cfg.EjectMax > 0 {
		s.Reg.EjectMax = max(cfg.EjectMax, s.Reg.EjectBase)
	}
	s.Reg.Metrics = s.Metrics
	hosts, err := ristretto.NewCache(&ristretto.Config[string, dataplane.HostEntry]{
		NumCounters:        10 * hostCacheEntries,
		MaxCost:            hostCacheEntries,
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		cfg.Logger.Warn("host cache disabled", "error", err)
	}
	s.Hosts = hosts
	reserve := cfg.RelayFDReserve
	if reserve <= 0 {
		reserve = -1 // l4's default
	}
	budget := l4.NewBudget(cfg.RelayMaxConns, reserve)
	s.wakes = wake.NewBoard(s.Metrics.Reg)
	s.tcp = l4.NewTCPRelays(l4.TCPConfig{
		Wake:     func(app, service string, bound time.Duration) { s.wakes.Ask(app, service, bound) },
		WakeHeld: s.wakes.Held,
		Backends: l4Backends{s.Reg}, DialTimeout: cfg.DialTimeout, Logger: cfg.Logger, Budget: budget,
		Listen: func(addr string) (net.Listener, error) {
			return s.listenStream("tcp "+addr, addr, net.ListenConfig{})
		},
		Forget:     func(addr string) { s.socks.forget("tcp " + addr) },
		PeerClosed: dataplane.PeerClosed, DialRetryHook: tcpDialRetryHook,
	})
	registerRelayMetrics(s.Metrics.Reg, s.tcp, budget)
	s.push = s.newPusher()
	s.udp = l4.NewUDPRelays(l4.UDPConfig{
		Backends: l4Backends{s.Reg}, IdleTimeout: cfg.UDPIdleTimeout, Logger: cfg.Logger,
		MaxSessions: cfg.UDPMaxSessions, MaxSessionsPerSource: cfg.UDPMaxSessionsPerSource, Budget: budget,
		Listen: func(addr string) (*net.UDPConn, error) { return s.listenPacket("udp "+addr, addr) },
		Forget: func(addr string) { s.socks.forget("udp " + addr) },
	})
	return s
}

// Ready is closed once Run has bound its listeners, applied the route table
// found at start (if any) and written status.json.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// HTTPAddr returns the bound public HTTP address ("" before Ready).
func (s *Server) HTTPAddr() string { return loadString(&s.httpAddr) }

// AdminAddr returns the bound admin address ("" before Ready).
func (s *Server) AdminAddr() string { return loadString(&s.adminAddr) }

func loadString(p *atomic.Pointer[string]) string {
	if v := p.Load(); v != nil {
		return *v
	}
	return ""
}
