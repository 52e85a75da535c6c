package edgeproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/routetable"
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
	transport *http.Transport
	// inFlight counts HTTP requests being proxied to addr.
	inFlight atomic.Int64
	// openConns counts relayed TCP connections (and live UDP sessions).
	openConns atomic.Int64
	// unreferencedSince is set (unix nanos) when the last snapshot stopped
	// routing to addr; 0 while referenced. Guarded by registry.mu.
	unreferencedSince int64
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
}

func newRegistry(dialTimeout time.Duration, logger hclog.Logger) *registry {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &registry{
		backends:    make(map[string]*backend),
		dialTimeout: dialTimeout,
		bufferPool:  newBufferPool(),
		logger:      logger,
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
			b.unreferencedSince = now.UnixNano()
			continue
		}
		if b.inFlight.Load() == 0 && b.openConns.Load() == 0 &&
			now.Sub(time.Unix(0, b.unreferencedSince)) >= backendIdleEviction {
			b.transport.CloseIdleConnections()
			delete(r.backends, addr)
		}
	}
}

// status returns the live counters of every registered backend, sorted by
// address.
func (r *registry) status() []routetable.BackendStatus {
	r.mu.Lock()
	out := make([]routetable.BackendStatus, 0, len(r.backends))
	for addr, b := range r.backends {
		out = append(out, routetable.BackendStatus{Addr: addr, InFlight: b.inFlight.Load(), OpenConns: b.openConns.Load()})
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

// newBackend builds the proxy for addr: one tuned keep-alive transport per
// address, Rewrite with SetXForwarded (incoming X-Forwarded-* headers are
// dropped by ReverseProxy and replaced), the original Host preserved,
// streaming (FlushInterval -1) and errors mapped to 502/503/504.
func (r *registry) newBackend(addr string) *backend {
	target := &url.URL{Scheme: "http", Host: addr}
	dialer := &net.Dialer{Timeout: r.dialTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     false,
	}
	b := &backend{addr: addr, transport: tr}
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport:     tr,
		FlushInterval: -1,
		BufferPool:    r.bufferPool,
		ErrorLog:      r.logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			code, what := classifyProxyError(req.Context(), err)
			if code == 0 {
				return // the client went away; nobody reads an answer
			}
			r.logger.Debug("proxy error", "backend", addr, "host", req.Host, "status", code, "error", err)
			writeEdgeError(w, code, fmt.Sprintf("gordon-edge: %s (backend %s)\n", what, addr))
		},
	}
	return b
}

// classifyProxyError maps a transport error to a status code: 504 when the
// backend timed out, 503 when it refused or reset the connection (no
// container listening), 502 otherwise; 0 when the client canceled.
func classifyProxyError(ctx context.Context, err error) (int, string) {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return 0, ""
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return http.StatusGatewayTimeout, "backend timed out"
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return http.StatusServiceUnavailable, "backend unavailable"
	}
	return http.StatusBadGateway, "bad gateway"
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

// bufferPool is a sync.Pool of 32 KiB copy buffers shared by all proxies.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}}
}

func (p *bufferPool) Get() []byte  { return *(p.p.Get().(*[]byte)) }
func (p *bufferPool) Put(b []byte) { p.p.Put(&b) }
