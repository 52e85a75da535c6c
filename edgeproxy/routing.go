package edgeproxy

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/handoff"
)

// ServeHTTP routes one request by Host (exact, then longest wildcard
// suffix; port ignored; case-insensitive) to a backend of the current
// snapshot, counting it in flight on that backend until it ends (upgraded
// connections count as open connections instead, decision 16). The
// snapshot is read once, so a request finishes on the backend it started
// on. Unknown hosts get 404 "gordon-edge: no route for host X". With an
// access log every request gets its line (LogServeHTTP).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.Metrics.Access == nil {
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
	if tc := handoff.ConnTracked(r.Context()); tc != nil {
		if why := tc.Smuggling(r); why != "" {
			// RFC 9112 §6.1 (both framings) and §5.2 (line folding): a
			// front proxy may frame the request otherwise; the connection
			// closes after the answer (nginx answers 400 too).
			w.Header().Set("Connection", "close")
			dataplane.WriteEdgeError(w, http.StatusBadRequest, "gordon-edge: 400 Bad Request: "+why+"\n")
			return true
		}
	}
	return s.tls != nil && s.tls.servePolicy(w, r)
}

// answeredNoRoute answers a request whose host has no route and reports
// whether it did: 503 when a hold ended without a new generation (the
// replacement failed, SPEC R58), else 404, unless the edge's first table
// came while the request waited for it (false: route again).
func (s *Server) answeredNoRoute(w http.ResponseWriter, r *http.Request, wasHeld bool) bool {
	if wasHeld {
		writeUnavailable(w, "gordon-edge: "+dataplane.StripPort(r.Host)+" has no serving generation (its replacement did not complete)\n")
		return true
	}
	if s.firstTable.Await(r.Context()) {
		return false
	}
	s.answerUnrouted(w, r)
	return true
}

// serveHTTP is ServeHTTP's routing and proxying.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.answeredBeforeRouting(w, r) {
		return
	}
	upgrade := dataplane.IsUpgrade(r)
	var rt *dataplane.HTTPRoute
	var i int
	var b *dataplane.Backend
	var counter *atomic.Int64
	wasHeld, wakeUntil := false, time.Time{}
	for {
		snap := s.Snap.Load()
		rt = nil
		if snap != nil {
			rt = s.Route(snap, r.Host)
		}
		if rt == nil {
			if s.answeredNoRoute(w, r, wasHeld) {
				return
			}
			continue // the edge's first table came: route on it
		}
		if rt.Maint != nil && s.answerMaintenance(w, r, rt) {
			return
		}
		if rt.Guard != nil && !s.admit(w, r, rt) {
			return
		}
		if len(rt.Backends) == 0 {
			noteRoute(w, rt)
			// Held, stopped (SPEC R58) or asleep (R81): the event loop
			// and the h1 loop hand such requests here.
			if !s.holdOrWake(w, r, snap, rt, &wakeUntil) {
				return
			}
			wasHeld = true
			continue
		}
		i = rt.Pick()
		b = rt.Backends[i]
		// Upgraded connections (WebSocket) are not waited for by the drain
		// (SPEC decision 16): they count as open connections, not in flight.
		counter = &b.InFlight
		if upgrade {
			counter = &b.OpenConns
		}
		counter.Add(1)
		// Counted while snap was still current: any status read after the
		// next swap sees this request. Otherwise a swap slipped in between
		// the lookup and the count: route on the new snapshot instead, so a
		// drain that saw 0 after the swap can never miss a request.
		if s.Snap.Load() == snap {
			break
		}
		counter.Add(-1)
	}
	defer func() { counter.Add(-1) }() // counter moves on a retry
	if rt.Guard != nil && rt.Guard.HasUsers() {
		r.Header.Del("Authorization") // the backend never sees the password (R73)
	}
	rm := rt.Metrics[i]
	rm.InFlight.Inc()
	start := time.Now()
	reqID := rm.Access.EnsureRequestID(r)
	sw := dataplane.StatusWriterPool.Get().(*dataplane.StatusWriter)
	*sw = dataplane.StatusWriter{ResponseWriter: w, Route: rt}
	if r.TLS != nil {
		sw.HSTS = rt.HSTS
	}
	if !upgrade && r.Body != nil && r.Body != http.NoBody {
		sw.Guard = &handoff.BodyGuard{RC: r.Body, Ctl: http.NewResponseController(w), Timeout: s.cfg.BodyTimeout}
		r.Body = sw.Guard
	}
	defer func() {
		code := sw.Code
		if code == 0 {
			code = http.StatusOK // nothing written: net/http answers 200
			if upgrade {
				code = http.StatusSwitchingProtocols // hijacked tunnel
			}
		}
		rm.Observe(code, sw.ProxyErr, start)
		rm.InFlight.Dec()
		if rm.Access != nil {
			rm.Access.LogServeHTTP(r, rm, nil, code, sw.Written, start, reqID)
			noteLogged(w)
		}
		*sw = dataplane.StatusWriter{}
		dataplane.StatusWriterPool.Put(sw)
	}()
	sw.Idx = i
	rt.Proxies[i].ServeHTTP(sw, r)
	if sw.RetryErr != nil {
		s.retryServeHTTP(sw, r, &counter, &rm)
	}
}

// HostEntry is a cached wildcard resolution (route nil: no route) valid for
// one snapshot generation.
// route resolves r.Host on snap: exact hosts by map; otherwise, when snap
// has wildcard routes, through the bounded host cache (ristretto), which
// holds wildcard matches and negative answers for unknown hosts. Entries
// carry their generation, so an entry of an older snapshot is a miss (the
// cache is also cleared at each apply).
// IsUpgrade reports whether r asks for a protocol upgrade (Connection:
// upgrade plus an Upgrade header), which ReverseProxy turns into a tunnel.
