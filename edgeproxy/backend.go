package edgeproxy

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// backendIdleEviction is how long a backend that no snapshot references and
// that has no in-flight request or open connection stays in the registry.
// Keeping it a while closes the window where a request read the previous
// snapshot just before a swap and has not yet incremented the counter: the
// counter it increments is still the one the registry reports.
const backendIdleEviction = time.Minute

// backend is one upstream address: its reverse proxy, its transport and its
// drain counters (SPEC decision 16). One backend object exists per address
// for the life of the registry entry and is shared by every snapshot that
// routes to the address, so counters survive snapshot swaps.
type backend struct {
	addr      string
	proxy     *httputil.ReverseProxy
	transport *upstream.Transport
	// inFlight counts HTTP requests being proxied to addr and relayed TCP
	// connections awaiting its first byte (at most tcpAnswerWait).
	inFlight atomic.Int64
	// openConns counts relayed TCP connections (and live UDP sessions).
	openConns atomic.Int64
	// requests and errors are cumulative HTTP counts since the backend was
	// registered: every answered request, and those answered 5xx (the
	// backend's or the edge's own 502/503/504 proxy errors). The monitor
	// (SPEC R76) takes their deltas.
	requests, errors atomic.Int64
	// unreferencedSince is set (unix nanos) when the last snapshot stopped
	// routing to addr; 0 while referenced. Guarded by registry.mu.
	unreferencedSince int64
	// health is its passive health (ejection: upstream.Health).
	health upstream.Health
}

// registry owns every backend the edge has routed to recently, keyed by
// address. Only snapshot builds and status reads take its lock; the request
// path holds *backend pointers taken from the immutable snapshot.
type registry struct {
	mu          sync.Mutex
	backends    map[string]*backend
	dialTimeout time.Duration
	bufferPool  httputil.BufferPool
	logger      hclog.Logger
	errorLog    *log.Logger
	// metrics forgets an evicted backend's series (nil in unit tests).
	metrics *metrics
	// trusted are the proxies whose forwarded headers are kept (item 3).
	trusted []netip.Prefix
	// defaultTM are the timeouts of a route that sets none (the edge's
	// response timeout; set before the first snapshot).
	defaultTM upstream.Timeouts
	// h2c are the cleartext HTTP/2 transports of h2c routes (h2.go).
	h2c h2cPool
	// idleTimeout closes kept-alive backend connections idle this long
	// (Config.BackendIdleTimeout; set before the first snapshot).
	idleTimeout time.Duration
	// ejectBase and ejectMax bound passive-health ejections (upstream.Health;
	// set before the first snapshot).
	ejectBase, ejectMax time.Duration
}

// defaultBackendIdleTimeout is Config.BackendIdleTimeout's default.
const defaultBackendIdleTimeout = 90 * time.Second

func newRegistry(dialTimeout time.Duration, trusted []netip.Prefix, logger hclog.Logger) *registry {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &registry{
		backends:    make(map[string]*backend),
		dialTimeout: dialTimeout,
		bufferPool:  upstream.NewBufferPool(),
		logger:      logger,
		errorLog:    logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		trusted:     trusted,
		idleTimeout: defaultBackendIdleTimeout,
		ejectBase:   upstream.DefaultEjectBase,
		ejectMax:    upstream.DefaultEjectMax,
	}
}

// sweepIdle closes every backend's pooled connections idle for
// idleTimeout or longer at now (the request path only checks the one it
// takes; the event loops sweep their own pools).
func (r *registry) sweepIdle(now time.Time) {
	r.mu.Lock()
	ts := make([]*upstream.Transport, 0, len(r.backends))
	for _, b := range r.backends {
		ts = append(ts, b.transport)
	}
	r.mu.Unlock()
	for _, t := range ts {
		t.SweepIdle(now)
	}
}

// get returns the backend for addr, creating it on first use, and marks it
// referenced. Called only while building a snapshot.
func (r *registry) get(addr string) *backend {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.backends[addr]
	if !ok {
		b = r.newBackend(addr)
		r.backends[addr] = b
	}
	b.unreferencedSince = 0
	b.transport.SetRetired(false)
	return b
}

// retain marks every backend outside referenced as unreferenced (from now)
// and evicts the ones idle and unreferenced for longer than
// backendIdleEviction.
func (r *registry) retain(referenced map[string]struct{}, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for addr, b := range r.backends {
		if _, ok := referenced[addr]; ok {
			b.unreferencedSince = 0
			continue
		}
		if b.unreferencedSince == 0 {
			// Just switched away from: close its idle keep-alive
			// connections now, and connections of requests still in flight
			// as they finish, so the old container sees no
			// lingering connection from the edge.
			b.unreferencedSince = now.UnixNano()
			b.transport.SetRetired(true)
			b.transport.CloseIdleConnections()
			continue
		}
		if b.inFlight.Load() == 0 && b.openConns.Load() == 0 &&
			now.Sub(time.Unix(0, b.unreferencedSince)) >= backendIdleEviction {
			b.transport.CloseIdleConnections()
			delete(r.backends, addr)
			r.h2c.forget(addr)
			if r.metrics != nil {
				r.metrics.forget(addr)
			}
		}
	}
}

// status returns the live counters of every registered backend, sorted by
// address, with the end and reason of a current ejection (health.go).
func (r *registry) status() []routetable.BackendStatus {
	now := time.Now().UnixNano()
	r.mu.Lock()
	out := make([]routetable.BackendStatus, 0, len(r.backends))
	for addr, b := range r.backends {
		bs := routetable.BackendStatus{Addr: addr, InFlight: b.inFlight.Load(), OpenConns: b.openConns.Load(),
			Requests: b.requests.Load(), Errors: b.errors.Load()}
		if until := b.health.Until(); until > now {
			bs.EjectedUntil = time.UnixMilli(until / 1e6).UTC()
			bs.EjectReason = b.health.Reason()
		}
		out = append(out, bs)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// closeIdle closes idle keep-alive connections of every backend (shutdown).
func (r *registry) closeIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.backends {
		b.transport.CloseIdleConnections()
	}
}

// newBackend builds the backend for addr: one keep-alive connection pool
// (upstream.Transport over a tuned http.Transport) and the default reverse
// proxy (edge-wide dial timeout, no response header timeout).
func (r *registry) newBackend(addr string) *backend {
	b := &backend{addr: addr, transport: upstream.NewTransport(addr, r.dialTimeout, r.idleTimeout)}
	b.health.Base, b.health.Max = r.ejectBase, r.ejectMax
	b.proxy = r.newProxy(b, r.defaultTM)
	return b
}

// proxyFor returns the reverse proxy of b for a route with timeouts tm:
// the shared default one when tm are the defaults, else a new one over the
// same connection pool. Called while building a snapshot, never per
// request.
func (r *registry) proxyFor(b *backend, tm upstream.Timeouts) *httputil.ReverseProxy {
	if tm == r.defaultTM {
		return b.proxy
	}
	return r.newProxy(b, tm)
}

// newProxy builds a ReverseProxy to b: Rewrite sets the URL, keeps the
// original Host and sets the forwarded headers (setForwarded); responses
// stream (FlushInterval -1, so SSE events pass as sent); errors map to
// 502/503/504 pages naming the cause and the backend.
func (r *registry) newProxy(b *backend, tm upstream.Timeouts) *httputil.ReverseProxy {
	target := &url.URL{Scheme: "http", Host: b.addr}
	addr := b.addr
	rt := b.transport.WithTimeouts(tm)
	trusted := r.trusted
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = target.Scheme
			pr.Out.URL.Host = target.Host
			pr.Out.Host = pr.In.Host
			dropUnderscoreAliases(pr.Out.Header)
			policy.SetForwarded(pr, trusted)
			pr.Out = pr.Out.WithContext(httptrace.WithClientTrace(pr.Out.Context(), upstream.InformationalBudget()))
		},
		Transport:     rt,
		FlushInterval: -1,
		BufferPool:    r.bufferPool,
		ErrorLog:      r.errorLog,
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			r.proxyError(w, req, addr, err)
		},
	}
}

// proxyError answers the error page for a failed backend exchange (or
// nothing when the client went away) and marks it for the metrics.
func (r *registry) proxyError(w http.ResponseWriter, req *http.Request, addr string, err error) {
	sw, _ := w.(*statusWriter)
	if sw != nil && sw.guard != nil {
		if code := sw.guard.failure(); code != 0 {
			// The client's body failed (it stalled or was malformed): the
			// client's fault, and the connection cannot go on.
			r.logger.Debug("request body failed", "backend", addr, "host", req.Host, "status", code, "error", err)
			w.Header().Set("Connection", "close")
			what := "malformed request body"
			if code == http.StatusRequestTimeout {
				what = "the client sent no body bytes within the body timeout"
			}
			writeEdgeError(w, code, fmt.Sprintf("gordon-edge: %d %s: %s\n", code, http.StatusText(code), what))
			return
		}
	}
	code, what := upstream.Classify(req.Context(), err)
	if code != 0 && sw != nil && sw.rt != nil && r.deferForRetry(sw, req, err) {
		return // serveHTTP sends the request again to another instance
	}
	if code == 0 {
		// The client went away (net/http also takes a client that shut
		// its write side for gone). Returning would let net/http answer
		// an empty 200 that a half-closed client reads as a whole
		// answer: the connection is cut instead.
		if sw != nil {
			sw.code = statusClientClosed
		}
		panic(http.ErrAbortHandler)
	}
	var rt *httpRoute
	if sw != nil {
		sw.proxyErr = code
		rt = sw.rt
	}
	r.logger.Debug("proxy error", "backend", addr, "host", req.Host, "status", code, "error", err)
	writeEdgeError(w, code, proxyErrorBody(code, what, rt))
}

// proxyErrorBody is the text of a 502/503/504 page: which status, why, and
// which app and service failed to answer (both HTTP paths answer with it;
// the backend's loopback address is not shown to clients, it is in the
// debug log).
func proxyErrorBody(code int, what string, rt *httpRoute) string {
	if rt == nil {
		return fmt.Sprintf("gordon-edge: %d %s: %s\n", code, http.StatusText(code), what)
	}
	return fmt.Sprintf("gordon-edge: %d %s: %s (app %s, service %s)\n", code, http.StatusText(code), what, rt.app, rt.service)
}

// dropUnderscoreAliases removes the headers underscoreAlias names.
func dropUnderscoreAliases(h http.Header) {
	for k := range h {
		if strings.IndexByte(k, '_') >= 0 && h1wire.UnderscoreAlias([]byte(k)) {
			delete(h, k)
		}
	}
}

// writeEdgeError writes a short plain-text error page.
func writeEdgeError(w http.ResponseWriter, code int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

// deferForRetry applies passive health (R21) to a failed ServeHTTP
// exchange: it ejects the backend when err says it failed and reports
// whether the request goes once to another instance instead of the error
// page (nothing answered yet, no body, not an upgrade, not retried, and
// another instance not ejected); serveHTTP then retries with
// sw.retryErr.
func (r *registry) deferForRetry(sw *statusWriter, req *http.Request, err error) bool {
	reason := upstream.EjectReason(err, false)
	if reason == "" {
		return false
	}
	rt := sw.rt
	if sw.idx >= len(rt.backends) || rt.backends[sw.idx].addr != req.URL.Host {
		return false
	}
	rt.eject(r, sw.idx, reason)
	if sw.retried || sw.code != 0 || sw.guard != nil || isUpgrade(req) ||
		!upstream.Retryable(req.Method, req.ContentLength != 0) ||
		rt.other(sw.idx, time.Now().UnixNano()) < 0 {
		return false
	}
	sw.retryErr = err
	return true
}
