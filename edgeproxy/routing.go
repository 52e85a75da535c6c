package edgeproxy

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// ServeHTTP routes one request by Host (exact, then longest wildcard
// suffix; port ignored; case-insensitive) to a backend of the current
// snapshot, counting it in flight on that backend until it ends (upgraded
// connections count as open connections instead, decision 16). The
// snapshot is read once, so a request finishes on the backend it started
// on. Unknown hosts get 404 "gordon-edge: no route for host X". With an
// access log every request gets its line (logServeHTTP).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.metrics.access == nil {
		s.serveHTTP(w, r)
		return
	}
	s.serveHTTPLogged(w, r)
}

// answeredBeforeRouting answers what is decided before any route is looked
// up and reports whether it did: a request framed two ways or with folded
// lines (400, the connection closes) and the HTTPS policy (redirects, ACME
// challenges).
func (s *Server) answeredBeforeRouting(w http.ResponseWriter, r *http.Request) bool {
	if tc := connTracked(r.Context()); tc != nil {
		if why := tc.smuggling(r); why != "" {
			// RFC 9112 §6.1 (both framings) and §5.2 (line folding): a
			// front proxy may frame the request otherwise; the connection
			// closes after the answer (nginx answers 400 too).
			w.Header().Set("Connection", "close")
			writeEdgeError(w, http.StatusBadRequest, "gordon-edge: 400 Bad Request: "+why+"\n")
			return true
		}
	}
	return s.tls != nil && s.tls.servePolicy(w, r)
}

// serveHTTP is ServeHTTP's routing and proxying.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.answeredBeforeRouting(w, r) {
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
			s.answerUnrouted(w, r)
			return
		}
		if rt.maint != nil && s.answerMaintenance(w, r, rt) {
			return
		}
		if rt.guard != nil && !s.admit(w, r, rt) {
			return
		}
		if len(rt.backends) == 0 {
			noteRoute(w, rt)
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
	defer func() { counter.Add(-1) }() // counter moves on a retry
	if rt.guard != nil && rt.guard.HasUsers() {
		r.Header.Del("Authorization") // the backend never sees the password (R73)
	}
	rm := rt.metrics[i]
	rm.inFlight.Inc()
	start := time.Now()
	reqID := rm.access.ensureRequestID(r)
	sw := statusWriterPool.Get().(*statusWriter)
	*sw = statusWriter{ResponseWriter: w, rt: rt}
	if r.TLS != nil {
		sw.hsts = rt.hsts
	}
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
		if rm.access != nil {
			rm.access.logServeHTTP(r, rm, nil, code, sw.written, start, reqID)
			noteLogged(w)
		}
		*sw = statusWriter{}
		statusWriterPool.Put(sw)
	}()
	sw.idx = i
	rt.proxies[i].ServeHTTP(sw, r)
	if sw.retryErr != nil {
		s.retryServeHTTP(sw, r, &counter, &rm)
	}
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
func (s *proxyCore) route(snap *snapshot, rawHost string) *httpRoute {
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
