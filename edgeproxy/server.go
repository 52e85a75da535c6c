// Package edgeproxy is gordon-edge: the edge proxy that routes public HTTP
// traffic by Host and relays TCP and UDP by listen port to whichever backends the
// route table <state>/edge/routes.json names (ARCHITECTURE §5, SPEC
// decisions 11 and 16).
//
// The table is watched by polling: every Config.PollInterval (default
// 150 ms) the file is stat'ed and re-read when its mtime, size or inode
// changed, and re-read unconditionally every 2 s as a fallback
// (fsnotify is not a dependency; a stat per 150 ms is negligible). A table
// is strictly decoded and validated, built into an immutable snapshot and
// swapped in atomically; a bad table leaves the last good snapshot serving
// (also across a restart: the last applied table is kept in
// <state>/edge/applied.json).
// After every apply attempt the edge writes <state>/edge/status.json
// atomically (routetable.Status). Live per-backend counters are served on
// the admin endpoint (GET /status, GET /healthz, GET /metrics in the
// Prometheus text format; POST /reload re-reads the table at once;
// /debug/pprof/ with Config.Pprof).
//
// The HTTP hot path (issue 5): the public listener is served by the edge's
// own HTTP/1.1 loop (h1.go), which proxies plain bodiless GET/HEAD requests
// with no allocation per request over a per-backend keep-alive pool
// (fastTransport) and hands every other connection, at a request boundary,
// to a net/http server running ServeHTTP (ReverseProxy over the same
// pool; bodies and upgrades over http.Transport). Exact hosts are a map lookup,
// wildcard and unknown hosts go through a bounded ristretto cache;
// metrics use label children resolved at snapshot build; nothing is logged
// per request. Requests carry X-Forwarded-For/-Proto/-Host, Forwarded and
// X-Request-ID (forwarded.go); per-route dial and response header timeouts
// come from the table (response header timeout default 60 s,
// Config.ResponseTimeout, then 504). The public server has a read header
// timeout and no write timeout. `make bench-edge` compares the edge with
// nginx.
//
// Hostile input (guard.go): request heads over 64 KiB get 431; a request
// with both Content-Length and Transfer-Encoding, or with a folded header
// line, gets 400 and its connection closes (RFC 9112 §6.1, §5.2); header
// names spelled with underscores that read as framing, forwarding or
// client headers are dropped; a request body idle for the body timeout
// (default 60 s) gets 408 and a malformed one 400, and the connection
// closes; error pages name the app and service, not the backend address.
// UDP sessions are bounded per listener, per source and by descriptors
// (udp.go).
package edgeproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/routetable"
)

// File names inside <state>/edge.
const (
	RoutesFile = routetable.RoutesFile
	StatusFile = routetable.StatusFile
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
	// ACME configures certificate issuance for HTTPSAddr.
	ACME ACMEConfig
	// AdminAddr is the loopback admin listen address (GET /status,
	// /healthz). Default "127.0.0.1:0"; the bound address is written to
	// status.json as admin_addr.
	AdminAddr string
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
	// EventLoops is how many event loop threads serve the public HTTP
	// listener's simple requests (Linux; evloop_linux.go). 0: the
	// environment's GORDON_EDGE_EVENT_LOOPS if set, else one per four
	// CPUs, at least one; negative: none, a goroutine per connection.
	EventLoops int
	// NoHandover turns the listener hand-over off (SPEC R60): Run neither
	// takes the listeners of an edge already serving StateDir nor offers
	// its own on <state>/edge/handover.sock.
	NoHandover bool
}

// DefaultResponseTimeout is the response header timeout of a route that
// sets none (Config.ResponseTimeout).
const DefaultResponseTimeout = 60 * time.Second

// maxRequestHead bounds a request head (request line and headers) on both
// HTTP paths; a larger one is answered 431. net/http allows 4 KiB over
// MaxHeaderBytes.
const maxRequestHead = 64 << 10

// hostCacheEntries bounds the host cache (wildcard matches and unknown
// hosts); an entry costs a few dozen bytes.
const hostCacheEntries = 10000

// Server is the edge proxy. It is an http.Handler (the public router).
// Create it with New, start it with Run.
type Server struct {
	cfg    Config
	logger hclog.Logger

	snap atomic.Pointer[snapshot]
	// hosts caches wildcard and negative host resolutions (bounded).
	hosts   *ristretto.Cache[string, hostEntry]
	metrics *metrics
	reg     *registry
	tcp     *tcpRelays
	udp     *udpRelays
	// h1 is the public HTTP/1.1 loop (h1.go); set by Run.
	h1 *h1Server
	// tls is the HTTPS side (tls.go); nil without HTTPSAddr.
	tls       *tlsEdge
	httpsAddr atomic.Pointer[string]

	// socks are the listening sockets by name, for the hand-over.
	socks *listenerSet
	// handedOver is closed once a new edge took the listeners over.
	handedOver   chan struct{}
	handoverOnce sync.Once

	startedAt time.Time
	ready     chan struct{}
	// reload queues an immediate route table read (admin POST /reload).
	reload    chan struct{}
	reloaded  reloadWaiters // POST /reload callers awaiting the read (reload.go)
	httpAddr  atomic.Pointer[string]
	adminAddr atomic.Pointer[string]

	// applyMu serializes applies and status writes.
	applyMu     sync.Mutex
	lastErr     string
	rejectedGen uint64
}

var _ http.Handler = (*Server)(nil)

// New returns a Server for cfg. It binds nothing until Run.
func New(cfg Config) *Server {
	if cfg.AdminAddr == "" {
		cfg.AdminAddr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 150 * time.Millisecond
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	if cfg.ResponseTimeout <= 0 {
		cfg.ResponseTimeout = DefaultResponseTimeout
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 60 * time.Second
	}
	if cfg.UDPIdleTimeout <= 0 {
		cfg.UDPIdleTimeout = 30 * time.Second
	}
	if cfg.EventLoops == 0 {
		cfg.EventLoops, _ = strconv.Atoi(os.Getenv("GORDON_EDGE_EVENT_LOOPS"))
	}
	s := &Server{
		cfg:       cfg,
		logger:    cfg.Logger,
		startedAt: time.Now().UTC(),
		ready:     make(chan struct{}),
		reload:    make(chan struct{}, 1),

		socks:      newListenerSet(),
		handedOver: make(chan struct{}),
	}
	s.metrics = newMetrics()
	s.reg = newRegistry(cfg.DialTimeout, cfg.TrustedProxies, cfg.Logger)
	s.reg.defaultTM = routeTimeouts{responseHeader: cfg.ResponseTimeout}
	s.reg.metrics = s.metrics
	hosts, err := ristretto.NewCache(&ristretto.Config[string, hostEntry]{
		NumCounters:        10 * hostCacheEntries,
		MaxCost:            hostCacheEntries,
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		cfg.Logger.Warn("host cache disabled", "error", err)
	}
	s.hosts = hosts
	s.tcp = newTCPRelays(s.reg, cfg.DialTimeout, cfg.Logger)
	s.tcp.listen = func(addr string) (net.Listener, error) {
		return s.listenStream("tcp "+addr, addr, net.ListenConfig{})
	}
	s.tcp.forget = func(addr string) { s.socks.forget("tcp " + addr) }
	s.udp = newUDPRelays(s.reg, cfg.UDPIdleTimeout, cfg.Logger)
	if cfg.UDPMaxSessions > 0 {
		s.udp.maxSessions = cfg.UDPMaxSessions
	}
	if cfg.UDPMaxSessionsPerSource > 0 {
		s.udp.maxPerSource = cfg.UDPMaxSessionsPerSource
	}
	s.udp.listen = func(addr string) (*net.UDPConn, error) { return s.listenPacket("udp "+addr, addr) }
	s.udp.forget = func(addr string) { s.socks.forget("udp " + addr) }
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

// Run binds the HTTP and admin listeners, applies the current route table,
// then watches it until ctx ends, and shuts down gracefully: listeners
// close, in-flight HTTP requests get up to ShutdownTimeout, relayed TCP
// connections and UDP sessions are closed. It returns nil after a shutdown
// caused by ctx, an error if the configuration is incomplete, a listener
// cannot be bound or a server fails. Call it once per Server.
func (s *Server) Run(ctx context.Context) error {
	if s.cfg.StateDir == "" {
		return errors.New("gordon-edge: state directory is required")
	}
	if s.cfg.HTTPAddr == "" {
		return errors.New("gordon-edge: HTTP listen address is required")
	}
	if err := os.MkdirAll(filepath.Join(s.cfg.StateDir, "edge"), 0o700); err != nil {
		return fmt.Errorf("gordon-edge: state directory: %w", err)
	}
	var lc net.ListenConfig
	if s.cfg.ReusePort {
		if !reusePortSupported {
			return errors.New("gordon-edge: --reuse-port is supported on Linux only")
		}
		lc.Control = reusePortControl
	}
	// An edge already serving this state directory hands its listeners
	// over (SPEC R60); it keeps serving until this one confirms.
	var handover *net.UnixConn
	if !s.cfg.NoHandover {
		var herr error
		if handover, herr = s.takeOver(); herr != nil {
			s.logger.Warn("listener hand-over failed; binding anew", "error", herr)
		}
		if handover != nil {
			defer handover.Close() // unconfirmed: the old edge keeps serving
		}
	}
	httpLn, err := s.listenStream("http", s.cfg.HTTPAddr, lc)
	if err != nil {
		s.socks.dropInherited()
		return fmt.Errorf("gordon-edge: listen http %s: %w", s.cfg.HTTPAddr, err)
	}
	adminLn, err := s.listenStream("admin", s.cfg.AdminAddr, net.ListenConfig{})
	if err != nil {
		_ = httpLn.Close()
		s.socks.dropInherited()
		return fmt.Errorf("gordon-edge: listen admin %s: %w", s.cfg.AdminAddr, err)
	}
	httpsLn, httpsSrv, err := s.startTLS(lc, httpLn.Addr())
	if err != nil {
		_ = httpLn.Close()
		_ = adminLn.Close()
		return err
	}
	httpAddr, adminAddr := httpLn.Addr().String(), adminLn.Addr().String()
	s.httpAddr.Store(&httpAddr)
	s.adminAddr.Store(&adminAddr)

	httpSrv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    maxRequestHead - 4096,
		// The framing of handed-off connections is followed (guard.go).
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*trackedConn); ok {
				return context.WithValue(ctx, trackedConnKey{}, tc)
			}
			return ctx
		},
		ErrorLog: s.logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		// No WriteTimeout: responses stream for as long as the backend sends.
	}
	adminSrv := &http.Server{
		Handler:           s.adminHandler(),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
	}

	s.h1 = newH1Server(s, httpLn.Addr(), httpSrv.IdleTimeout)
	s.h1.startLoops(evLoopCount(s.cfg.EventLoops))
	w := &watcher{path: filepath.Join(s.cfg.StateDir, "edge", RoutesFile)}
	s.poll(w, true)
	if dropped := s.socks.dropInherited(); len(dropped) > 0 {
		s.logger.Info("listeners of the previous edge not in this configuration closed", "listeners", dropped)
	}

	errc := make(chan error, 4)
	h1Stopped := make(chan struct{})
	if httpsSrv != nil {
		go func() { errc <- serveErr("https", s.tls.serve(httpsSrv, httpsLn)) }()
	}
	go func() { errc <- serveErr("http", s.h1.serve(httpLn)); close(h1Stopped) }()
	go func() { errc <- serveErr("http handoff", httpSrv.Serve(s.h1.handoff)) }()
	go func() { errc <- serveErr("admin", adminSrv.Serve(adminLn)) }()
	if !s.cfg.NoHandover {
		if handover != nil {
			s.confirmTakeOver(handover)
		}
		hln, err := s.listenHandover()
		if err != nil {
			s.logger.Warn("no listener hand-over for the next edge", "error", err)
		} else {
			defer hln.Close()
		}
	}
	close(s.ready)
	s.logger.Info("gordon-edge serving", "http", httpAddr, "admin", adminAddr, "state_dir", s.cfg.StateDir)

	var runErr error
	handedOver := false
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-s.handedOver:
			handedOver = true
			break loop
		case err := <-errc:
			runErr = err
			break loop
		case <-tick.C:
			s.poll(w, false)
			s.tlsTick()
		case <-s.reload:
			s.pollReload(w)
		}
	}

	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	_ = httpLn.Close()
	// A connection accepted while the listener closed is registered and
	// served (its request answered), not dropped by the drain below.
	select {
	case <-h1Stopped:
	case <-sctx.Done():
	}
	tcpDrained := make(chan struct{})
	if handedOver {
		// Every listener stops at once (the new edge accepts on the same
		// sockets); relayed TCP connections stay on this edge until they
		// end or the drain bound passes, UDP sessions re-form on the new
		// edge.
		_ = adminSrv.Close()
		s.udp.close()
		go func() { s.tcp.drain(sctx); close(tcpDrained) }()
	} else {
		close(tcpDrained)
	}
	httpsDone := s.shutdownTLS(sctx, httpsSrv)
	// Both servers drain at once: the loop's connections and the ones
	// handed to net/http share the one ShutdownTimeout.
	h1Done := make(chan error, 1)
	go func() { h1Done <- s.h1.shutdown(sctx) }()
	if err := httpSrv.Shutdown(sctx); err != nil {
		s.logger.Warn("http shutdown incomplete", "error", err)
		_ = httpSrv.Close()
	}
	if err := <-h1Done; err != nil {
		s.logger.Warn("http shutdown incomplete", "error", err)
	}
	<-httpsDone
	_ = adminSrv.Close()
	<-tcpDrained
	s.tcp.close()
	s.udp.close()
	s.reg.closeIdle()
	s.logger.Info("gordon-edge stopped")
	return runErr
}

func serveErr(what string, err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("gordon-edge: %s server: %w", what, err)
}

// ServeHTTP routes one request by Host (exact, then longest wildcard
// suffix; port ignored; case-insensitive) to a backend of the current
// snapshot, counting it in flight on that backend until it ends (upgraded
// connections count as open connections instead, decision 16). The
// snapshot is read once, so a request finishes on the backend it started
// on. Unknown hosts get 404 "gordon-edge: no route for host X".
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if tc := connTracked(r.Context()); tc != nil {
		if why := tc.smuggling(r); why != "" {
			// RFC 9112 §6.1 (both framings) and §5.2 (line folding): a
			// front proxy may frame the request otherwise; the connection
			// closes after the answer (nginx answers 400 too).
			w.Header().Set("Connection", "close")
			writeEdgeError(w, http.StatusBadRequest, "gordon-edge: 400 Bad Request: "+why+"\n")
			return
		}
	}
	if s.tls != nil && s.tls.servePolicy(w, r) {
		return
	}
	upgrade := isUpgrade(r)
	var rt *httpRoute
	var i int
	var b *backend
	var counter *atomic.Int64
	wasHeld := false
	for {
		snap := s.snap.Load()
		rt = nil
		if snap != nil {
			rt = s.route(snap, r.Host)
		}
		if rt == nil {
			if wasHeld {
				// The hold ended without a new generation: the replacement
				// failed (SPEC R58).
				writeUnavailable(w, "gordon-edge: "+stripPort(r.Host)+" has no serving generation (its replacement did not complete)\n")
				return
			}
			s.metrics.unrouted.Inc()
			writeEdgeError(w, http.StatusNotFound, "gordon-edge: no route for host "+stripPort(r.Host)+"\n")
			return
		}
		if len(rt.backends) == 0 {
			// Held or stopped (SPEC R58): the event loop and the h1 loop
			// hand such requests here.
			if !s.holdHTTP(w, r, snap, rt) {
				return
			}
			wasHeld = true
			continue
		}
		i = rt.pick()
		b = rt.backends[i]
		// Upgraded connections (WebSocket) are not waited for by the drain
		// (SPEC decision 16): they count as open connections, not in flight.
		counter = &b.inFlight
		if upgrade {
			counter = &b.openConns
		}
		counter.Add(1)
		// Counted while snap was still current: any status read after the
		// next swap sees this request. Otherwise a swap slipped in between
		// the lookup and the count: route on the new snapshot instead, so a
		// drain that saw 0 after the swap can never miss a request.
		if s.snap.Load() == snap {
			break
		}
		counter.Add(-1)
	}
	defer counter.Add(-1)
	rm := rt.metrics[i]
	rm.inFlight.Inc()
	start := time.Now()
	sw := statusWriterPool.Get().(*statusWriter)
	*sw = statusWriter{ResponseWriter: w, rt: rt}
	if !upgrade && r.Body != nil && r.Body != http.NoBody {
		sw.guard = &bodyGuard{rc: r.Body, ctl: http.NewResponseController(w), timeout: s.cfg.BodyTimeout}
		r.Body = sw.guard
	}
	defer func() {
		code := sw.code
		if code == 0 {
			code = http.StatusOK // nothing written: net/http answers 200
			if upgrade {
				code = http.StatusSwitchingProtocols // hijacked tunnel
			}
		}
		rm.observe(code, sw.proxyErr, start)
		rm.inFlight.Dec()
		*sw = statusWriter{}
		statusWriterPool.Put(sw)
	}()
	rt.proxies[i].ServeHTTP(sw, r)
}

// hostEntry is a cached wildcard resolution (route nil: no route) valid for
// one snapshot generation.
type hostEntry struct {
	gen   uint64
	route *httpRoute
}

// route resolves r.Host on snap: exact hosts by map; otherwise, when snap
// has wildcard routes, through the bounded host cache (ristretto), which
// holds wildcard matches and negative answers for unknown hosts. Entries
// carry their generation, so an entry of an older snapshot is a miss (the
// cache is also cleared at each apply).
func (s *Server) route(snap *snapshot, rawHost string) *httpRoute {
	host := normalizeHost(rawHost)
	if r, ok := snap.exact[host]; ok {
		return r
	}
	if len(snap.wildcards) == 0 || s.hosts == nil {
		return nil
	}
	if e, ok := s.hosts.Get(host); ok && e.gen == snap.generation {
		return e.route
	}
	r := snap.matchWildcard(host)
	s.hosts.Set(host, hostEntry{gen: snap.generation, route: r}, 1)
	return r
}

// isUpgrade reports whether r asks for a protocol upgrade (Connection:
// upgrade plus an Upgrade header), which ReverseProxy turns into a tunnel.
func isUpgrade(r *http.Request) bool {
	if r.Header.Get("Upgrade") == "" {
		return false
	}
	for _, v := range r.Header["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// Reload asks Run to re-read the route table now instead of at the next
// poll (SIGHUP, admin POST /reload); the outcome shows in status.json as
// for any apply. It never blocks.
func (s *Server) Reload() {
	select {
	case s.reload <- struct{}{}:
	default: // one is queued already
	}
}

// Apply validates t (LoadTable rules), swaps it in as the serving snapshot,
// retargets the TCP and UDP relays and writes status.json (when StateDir is set).
// A rejected table leaves the previous snapshot serving and is recorded as
// the status error; the error wraps ErrInvalidTable. Run calls it for each
// new routes.json; tests may call it directly (TCP/UDP listeners it binds
// are closed when Run ends, so call it without Run only for HTTP-only
// tables).
func (s *Server) Apply(t routetable.Table) error {
	t.HTTP = append([]routetable.HTTPRoute(nil), t.HTTP...)
	if err := ValidateTable(&t); err != nil {
		s.reject(err, t.Generation)
		return err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	snap, referenced := buildSnapshot(t, s.reg, s.metrics)
	if s.tls != nil {
		s.tls.annotate(snap)
	}
	s.tcp.update(t.TCP)
	s.udp.update(t.UDP)
	prev := s.snap.Swap(snap)
	if prev != nil {
		close(prev.replaced) // held requests re-route on snap
	}
	if s.hosts != nil {
		s.hosts.Clear()
	}
	s.metrics.generation.Set(float64(t.Generation))
	s.reg.retain(referenced, time.Now())
	if s.h1 != nil {
		// The event loops close their idle connections to backends the
		// switch retired now, not at their next sweep.
		for _, l := range s.h1.loops {
			l.wakeup(false)
		}
	}
	s.lastErr, s.rejectedGen = "", 0
	s.logger.Info("route table applied", "generation", t.Generation, "http", len(t.HTTP), "tcp", len(t.TCP), "udp", len(t.UDP))
	s.writeStatusLocked()
	if s.tls != nil {
		go s.tls.refresh(true) // new hosts get their certificates ordered
	}
	return nil
}

// retryListeners re-binds listeners that failed to bind for the current
// snapshot (every fullRereadEvery from the watch loop) and rewrites
// status.json when that changed anything.
func (s *Server) retryListeners() {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	snap := s.snap.Load()
	if snap == nil || s.tcp.failedCount()+s.udp.failedCount() == 0 {
		return
	}
	before := s.tcp.listenerStatus()
	beforeUDP := s.udp.listenerStatus()
	s.tcp.update(snap.tcp)
	s.udp.update(snap.udp)
	if !sameListeners(before, s.tcp.listenerStatus()) || !sameListeners(beforeUDP, s.udp.listenerStatus()) {
		s.writeStatusLocked()
	}
}

func sameListeners(a, b []routetable.ListenerStatus) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[routetable.ListenerStatus]bool, len(a))
	for _, l := range a {
		m[l] = true
	}
	for _, l := range b {
		if !m[l] {
			return false
		}
	}
	return true
}

// reject records a rejected table and rewrites status.json.
func (s *Server) reject(err error, generation uint64) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.lastErr, s.rejectedGen = err.Error(), generation
	s.logger.Error("route table rejected; last good table keeps serving", "generation", generation, "error", err)
	s.writeStatusLocked()
}

// Status returns the live status: applied generation, last error, listeners
// and per-backend counters at the time of the call.
func (s *Server) Status() routetable.Status {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.statusLocked()
}

func (s *Server) statusLocked() routetable.Status {
	st := routetable.Status{
		PID:                os.Getpid(),
		StartedAt:          s.startedAt,
		UpdatedAt:          time.Now().UTC(),
		Error:              s.lastErr,
		RejectedGeneration: s.rejectedGen,
		AdminAddr:          s.AdminAddr(),
		Backends:           s.reg.status(),
		StateID:            routetable.StateDirID(s.cfg.StateDir),
	}
	if snap := s.snap.Load(); snap != nil {
		st.AppliedGeneration = snap.generation
	}
	if a := s.HTTPAddr(); a != "" {
		st.Listeners = append(st.Listeners, routetable.ListenerStatus{Addr: a, Proto: "http"})
	}
	if a := s.HTTPSAddr(); a != "" {
		st.Listeners = append(st.Listeners, routetable.ListenerStatus{Addr: a, Proto: "https"})
	}
	st.Listeners = append(st.Listeners, s.tcp.listenerStatus()...)
	st.Listeners = append(st.Listeners, s.udp.listenerStatus()...)
	sort.SliceStable(st.Listeners, func(i, j int) bool {
		if st.Listeners[i].Proto != st.Listeners[j].Proto {
			return st.Listeners[i].Proto < st.Listeners[j].Proto
		}
		return st.Listeners[i].Addr < st.Listeners[j].Addr
	})
	return st
}

// writeStatusLocked writes status.json atomically (temp file, fsync,
// rename, fsync of the directory). Failures are logged: the edge keeps
// serving.
func (s *Server) writeStatusLocked() {
	if s.cfg.StateDir == "" {
		return
	}
	data, err := json.MarshalIndent(s.statusLocked(), "", "  ")
	if err != nil {
		s.logger.Error("encode status", "error", err)
		return
	}
	if err := routetable.WriteFileAtomic(filepath.Join(s.cfg.StateDir, "edge", StatusFile), append(data, '\n')); err != nil {
		s.logger.Error("write status", "error", err)
	}
}

// adminHandler serves GET /status (live routetable.Status as JSON) and GET
// /healthz ("ok").
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Status())
	})
	mux.Handle("GET /metrics", s.metrics.handler())
	// POST /reload re-reads the route table now instead of at the next
	// poll (traffic/edge calls it right after writing a table) and answers
	// with the outcome (serveReload, reload.go).
	mux.HandleFunc("POST /reload", s.serveReload)
	if s.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// watcher remembers what the route table file looked like when last read.
type watcher struct {
	path     string
	stat     fileStamp
	data     []byte
	lastRead time.Time
	// force makes the next poll read the file even when its stat did not
	// change (Reload).
	force bool
}

// fileStamp is what a stat of the route table shows. Publishers replace the
// file by rename, so a new inode means a new table even when mtime and size
// look unchanged.
type fileStamp struct {
	exists      bool
	mtime       time.Time
	size        int64
	ino         uint64
	initialized bool
}

func stampOf(fi os.FileInfo) fileStamp {
	return fileStamp{exists: true, mtime: fi.ModTime(), size: fi.Size(), ino: fileIno(fi), initialized: true}
}

// poll re-reads the route table when it changed (or force, or the fallback
// interval passed) and applies it when its bytes differ from the last read.
// At start (first) it also writes status.json when there is no table yet,
// so a publisher can see the edge is up.
func (s *Server) poll(w *watcher, first bool) {
	now := time.Now()
	fi, err := os.Stat(w.path)
	var stamp fileStamp
	switch {
	case err == nil:
		stamp = stampOf(fi)
	case errors.Is(err, os.ErrNotExist):
		stamp = fileStamp{initialized: true}
	default:
		s.logger.Warn("stat route table", "path", w.path, "error", err)
		return
	}
	force := w.force
	w.force = false
	if !first && !force && stamp == w.stat && now.Sub(w.lastRead) < fullRereadEvery {
		return
	}
	if !first && stamp == w.stat {
		s.retryListeners()
	}
	w.stat = stamp
	w.lastRead = now
	if !stamp.exists {
		if first {
			// A restart with routes.json gone (deleted, a state directory
			// restored in part) serves the last table this edge applied,
			// and says so in status.json until a table is published.
			if gen, ok := s.restoreLastGood(); ok {
				s.applyMu.Lock()
				s.lastErr = fmt.Sprintf("%s is missing at start; serving the last applied table (generation %d) from %s", w.path, gen, AppliedFile)
				s.writeStatusLocked()
				s.applyMu.Unlock()
				s.logger.Warn("route table missing at start; serving the last applied table", "path", w.path, "generation", gen)
				return
			}
			s.applyMu.Lock()
			s.writeStatusLocked()
			s.applyMu.Unlock()
		}
		return // a vanished table keeps the last snapshot serving
	}
	data, err := os.ReadFile(w.path)
	if err != nil {
		s.logger.Warn("read route table", "path", w.path, "error", err)
		return
	}
	if !first && w.data != nil && string(data) == string(w.data) {
		return
	}
	w.data = data
	t, err := LoadTable(data)
	if err != nil {
		if first {
			s.restoreLastGood()
		}
		s.reject(fmt.Errorf("%s: %w", w.path, err), looseGeneration(data))
		return
	}
	if s.Apply(t) == nil {
		// Remember the last good table, so a restart while routes.json is
		// bad still serves it.
		if err := routetable.WriteFileAtomic(filepath.Join(filepath.Dir(w.path), AppliedFile), data); err != nil {
			s.logger.Warn("save last good route table", "error", err)
		}
	}
}

// restoreLastGood applies edge/applied.json (the last table this edge
// applied) when the edge starts with a bad or missing routes.json; it
// returns the generation applied, ok false when there was none to apply.
func (s *Server) restoreLastGood() (generation uint64, ok bool) {
	path := filepath.Join(s.cfg.StateDir, "edge", AppliedFile)
	data, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.logger.Warn("last good route table unreadable", "path", path, "error", err)
		}
		return 0, false
	}
	t, err := LoadTable(data)
	if err != nil {
		s.logger.Warn("last good route table unreadable", "path", path, "error", err)
		return 0, false
	}
	s.logger.Warn("routes.json is bad or missing at start; serving the last good table", "generation", t.Generation)
	if s.Apply(t) != nil {
		return 0, false
	}
	return t.Generation, true
}

// looseGeneration extracts "generation" from a rejected table when the
// document is at least JSON (0 otherwise).
func looseGeneration(data []byte) uint64 {
	var g struct {
		Generation uint64 `json:"generation"`
	}
	_ = json.Unmarshal(data, &g)
	return g.Generation
}
