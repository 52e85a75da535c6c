package dataplane

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

// Backend is one upstream address: its reverse proxy, its transport and its
// drain counters (SPEC decision 16). One backend object exists per address
// for the life of the registry entry and is shared by every snapshot that
// routes to the address, so counters survive snapshot swaps.
type Backend struct {
	Addr      string
	proxy     *httputil.ReverseProxy
	Transport *upstream.Transport
	// InFlight counts HTTP requests being proxied to addr and relayed TCP
	// connections awaiting its first byte (at most tcpAnswerWait).
	InFlight atomic.Int64
	// OpenConns counts relayed TCP connections (and live UDP sessions).
	OpenConns atomic.Int64
	// requests and errors are cumulative HTTP counts since the backend was
	// registered: every answered request, and those answered 5xx (the
	// backend's or the edge's own 502/503/504 proxy errors). The monitor
	// (SPEC R76) takes their deltas.
	requests, errors atomic.Int64
	// unreferencedSince is set (unix nanos) when the last snapshot stopped
	// routing to addr; 0 while referenced. Guarded by registry.mu.
	unreferencedSince int64
	// Health is its passive health (ejection: upstream.Health).
	Health upstream.Health
}

// Registry owns every backend the edge has routed to recently, keyed by
// address. Only snapshot builds and status reads take its lock; the request
// path holds *backend pointers taken from the immutable snapshot.
type Registry struct {
	Mu          sync.Mutex
	Backends    map[string]*Backend
	dialTimeout time.Duration
	bufferPool  httputil.BufferPool
	logger      hclog.Logger
	errorLog    *log.Logger
	// Metrics forgets an evicted backend's series (nil in unit tests).
	Metrics *Metrics
	// Trusted are the proxies whose forwarded headers are kept (item 3).
	Trusted []netip.Prefix
	// DefaultTM are the timeouts of a route that sets none (the edge's
	// response timeout; set before the first snapshot).
	DefaultTM upstream.Timeouts
	// H2C are the cleartext HTTP/2 transports of H2C routes (H2.go).
	h2c h2cPool
	// IdleTimeout closes kept-alive backend connections idle this long
	// (Config.BackendIdleTimeout; set before the first snapshot).
	IdleTimeout time.Duration
	// EjectBase and EjectMax bound passive-health ejections (upstream.Health;
	// set before the first snapshot).
	EjectBase, EjectMax time.Duration
}

// DefaultBackendIdleTimeout is Config.BackendIdleTimeout's default.
const DefaultBackendIdleTimeout = 90 * time.Second

func NewRegistry(dialTimeout time.Duration, trusted []netip.Prefix, logger hclog.Logger) *Registry {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Registry{
		Backends:    make(map[string]*Backend),
		dialTimeout: dialTimeout,
		bufferPool:  upstream.NewBufferPool(),
		logger:      logger,
		errorLog:    logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		Trusted:     trusted,
		IdleTimeout: DefaultBackendIdleTimeout,
		EjectBase:   upstream.DefaultEjectBase,
		EjectMax:    upstream.DefaultEjectMax,
	}
}

// SweepIdle closes every backend's pooled connections idle for
// IdleTimeout or longer at now (the request path only checks the one it
// takes; the event loops sweep their own pools).
func (r *Registry) SweepIdle(now time.Time) {
	r.Mu.Lock()
	ts := make([]*upstream.Transport, 0, len(r.Backends))
	for _, b := range r.Backends {
		ts = append(ts, b.Transport)
	}
	r.Mu.Unlock()
	for _, t := range ts {
		t.SweepIdle(now)
	}
}

// Get returns the backend for addr, creating it on first use, and marks it
// referenced. Called only while building a snapshot.
func (r *Registry) Get(addr string) *Backend {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	b, ok := r.Backends[addr]
	if !ok {
		b = r.newBackend(addr)
		r.Backends[addr] = b
	}
	b.unreferencedSince = 0
	b.Transport.SetRetired(false)
	return b
}

// Retain marks every backend outside referenced as unreferenced (from now)
// and evicts the ones idle and unreferenced for longer than
// backendIdleEviction.
func (r *Registry) Retain(referenced map[string]struct{}, now time.Time) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	for addr, b := range r.Backends {
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
			b.Transport.SetRetired(true)
			b.Transport.CloseIdleConnections()
			continue
		}
		if b.InFlight.Load() == 0 && b.OpenConns.Load() == 0 &&
			now.Sub(time.Unix(0, b.unreferencedSince)) >= backendIdleEviction {
			b.Transport.CloseIdleConnections()
			delete(r.Backends, addr)
			r.h2c.forget(addr)
			if r.Metrics != nil {
				r.Metrics.forget(addr)
			}
		}
	}
}

// Status returns the live counters of every registered backend, sorted by
// address, with the end and reason of a current ejection (health.go).
func (r *Registry) Status() []routetable.BackendStatus {
	now := time.Now().UnixNano()
	r.Mu.Lock()
	out := make([]routetable.BackendStatus, 0, len(r.Backends))
	for addr, b := range r.Backends {
		bs := routetable.BackendStatus{Addr: addr, InFlight: b.InFlight.Load(), OpenConns: b.OpenConns.Load(),
			Requests: b.requests.Load(), Errors: b.errors.Load()}
		if until := b.Health.Until(); until > now {
			bs.EjectedUntil = time.UnixMilli(until / 1e6).UTC()
			bs.EjectReason = b.Health.Reason()
		}
		out = append(out, bs)
	}
	r.Mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// CloseIdle closes idle keep-alive connections of every backend (shutdown).
func (r *Registry) CloseIdle() {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	for _, b := range r.Backends {
		b.Transport.CloseIdleConnections()
	}
}

// newBackend builds the backend for addr: one keep-alive connection pool
// (upstream.Transport over a tuned http.Transport) and the default reverse
// proxy (edge-wide dial timeout, no response header timeout).
func (r *Registry) newBackend(addr string) *Backend {
	b := &Backend{Addr: addr, Transport: upstream.NewTransport(addr, r.dialTimeout, r.IdleTimeout)}
	b.Health.Base, b.Health.Max = r.EjectBase, r.EjectMax
	b.proxy = r.newProxy(b, r.DefaultTM)
	return b
}

// proxyFor returns the reverse proxy of b for a route with timeouts tm:
// the shared default one when tm are the defaults, else a new one over the
// same connection pool. Called while building a snapshot, never per
// request.
func (r *Registry) proxyFor(b *Backend, tm upstream.Timeouts) *httputil.ReverseProxy {
	if tm == r.DefaultTM {
		return b.proxy
	}
	return r.newProxy(b, tm)
}

// newProxy builds a ReverseProxy to b: Rewrite sets the URL, keeps the
// original Host and sets the forwarded headers (setForwarded); responses
// stream (FlushInterval -1, so SSE events pass as sent); errors map to
// 502/503/504 pages naming the cause and the backend.
func (r *Registry) newProxy(b *Backend, tm upstream.Timeouts) *httputil.ReverseProxy {
	target := &url.URL{Scheme: "http", Host: b.Addr}
	addr := b.Addr
	rt := b.Transport.WithTimeouts(tm)
	trusted := r.Trusted
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
			r.ProxyError(w, req, addr, err)
		},
	}
}

// ProxyError answers the error page for a failed backend exchange (or
// nothing when the client went away) and marks it for the metrics.
func (r *Registry) ProxyError(w http.ResponseWriter, req *http.Request, addr string, err error) {
	sw, _ := w.(*StatusWriter)
	if sw != nil && sw.Guard != nil {
		if code := sw.Guard.Failure(); code != 0 {
			// The client's body failed (it stalled or was malformed): the
			// client's fault, and the connection cannot go on.
			r.logger.Debug("request body failed", "backend", addr, "host", req.Host, "status", code, "error", err)
			w.Header().Set("Connection", "close")
			what := "malformed request body"
			if code == http.StatusRequestTimeout {
				what = "the client sent no body bytes within the body timeout"
			}
			WriteEdgeError(w, code, fmt.Sprintf("gordon-edge: %d %s: %s\n", code, http.StatusText(code), what))
			return
		}
	}
	code, what := upstream.Classify(req.Context(), err)
	if code != 0 && sw != nil && sw.Route != nil && r.deferForRetry(sw, req, err) {
		return // serveHTTP sends the request again to another instance
	}
	if code == 0 {
		// The client went away (net/http also takes a client that shut
		// its write side for gone). Returning would let net/http answer
		// an empty 200 that a half-closed client reads as a whole
		// answer: the connection is cut instead.
		if sw != nil {
			sw.Code = StatusClientClosed
		}
		panic(http.ErrAbortHandler)
	}
	var rt *HTTPRoute
	if sw != nil {
		sw.ProxyErr = code
		rt = sw.Route
	}
	r.logger.Debug("proxy error", "backend", addr, "host", req.Host, "status", code, "error", err)
	WriteEdgeError(w, code, ProxyErrorBody(code, what, rt))
}

// ProxyErrorBody is the text of a 502/503/504 page: which status, why, and
// which app and service failed to answer (both HTTP paths answer with it;
// the backend's loopback address is not shown to clients, it is in the
// debug log).
func ProxyErrorBody(code int, what string, rt *HTTPRoute) string {
	if rt == nil {
		return fmt.Sprintf("gordon-edge: %d %s: %s\n", code, http.StatusText(code), what)
	}
	return fmt.Sprintf("gordon-edge: %d %s: %s (app %s, service %s)\n", code, http.StatusText(code), what, rt.App, rt.Service)
}

// dropUnderscoreAliases removes the headers underscoreAlias names.
func dropUnderscoreAliases(h http.Header) {
	for k := range h {
		if strings.IndexByte(k, '_') >= 0 && h1wire.UnderscoreAlias([]byte(k)) {
			delete(h, k)
		}
	}
}

// WriteEdgeError writes a short plain-text error page.
func WriteEdgeError(w http.ResponseWriter, code int, body string) {
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
func (r *Registry) deferForRetry(sw *StatusWriter, req *http.Request, err error) bool {
	reason := upstream.EjectReason(err, false)
	if reason == "" {
		return false
	}
	rt := sw.Route
	if sw.Idx >= len(rt.Backends) || rt.Backends[sw.Idx].Addr != req.URL.Host {
		return false
	}
	rt.eject(r, sw.Idx, reason)
	if sw.Retried || sw.Code != 0 || sw.Guard != nil || IsUpgrade(req) ||
		!upstream.Retryable(req.Method, req.ContentLength != 0) ||
		rt.Other(sw.Idx, time.Now().UnixNano()) < 0 {
		return false
	}
	sw.RetryErr = err
	return true
}
