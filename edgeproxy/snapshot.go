package edgeproxy

import (
	"net/http/httputil"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// snapshot is one applied route table, immutable once built (STYLE "What we
// take" 12, "What to avoid" 7): the request path reads it through an
// atomic.Pointer without any lock.
type snapshot struct {
	generation uint64
	// exact maps a lowercase host to its route.
	exact map[string]*httpRoute
	// wildcards are "*.suffix" routes ordered by suffix length, longest first.
	wildcards []*httpRoute
	tcp       []routetable.L4Route
	udp       []routetable.L4Route
	// replaced is closed when the next snapshot is swapped in: held
	// requests wait on it (SPEC R58).
	replaced chan struct{}
}

// httpRoute is one HTTP host and the backends serving it.
type httpRoute struct {
	host string
	// suffix is ".example.com" for "*.example.com", "" for exact hosts.
	suffix   string
	app      string
	service  string
	backends []*backend
	// proxies[i] is the reverse proxy to backends[i] with this route's
	// timeouts (shared with the backend's default proxy when it has none).
	proxies []*httputil.ReverseProxy
	// timeouts are the route's optional upstream timeouts.
	timeouts upstream.Timeouts
	// metrics[i] are the precomputed series of backends[i].
	metrics []*routeMetrics
	// next spreads requests over backends (more than one only transiently).
	next *atomic.Uint64
	// hold is set while the service is between generations, stopped when
	// it is stopped (both without backends, SPEC R58); held counts the
	// requests waiting on this route.
	hold    *routetable.Hold
	stopped bool
	// unavailable: the app runs but no instance is ready (503, not 404).
	unavailable bool
	held        *atomic.Int64
	// tls is the HTTPS policy ("auto", "always", "never"; tls.go), h2c
	// whether backends speak cleartext HTTP/2 (h2.go).
	tls string
	h2c bool
	// hsts is the Strict-Transport-Security value of the route's HTTPS
	// answers ("": none).
	hsts string
	// slowPlain sends this host's plain HTTP requests to ServeHTTP instead
	// of the event loop (redirects, h2c); set by tlsEdge.annotate.
	slowPlain atomic.Bool
	// guard is the route's allow and basic_auth rules (internal/policy; nil:
	// none); a guarded route is served by ServeHTTP only.
	guard *policy.Guard
	// maint is the route's maintenance mode (internal/policy; nil: none);
	// a route in maintenance is served by ServeHTTP only.
	maint *policy.Maintenance
}

// pick returns the index of the backend for one request (into backends,
// proxies and metrics): round-robin, skipping ejected backends (health.go;
// the healthy case costs one atomic load and no clock read).
func (r *httpRoute) pick() int {
	if len(r.backends) == 1 {
		return 0
	}
	i := int(r.next.Add(1) % uint64(len(r.backends)))
	if r.backends[i].health.Until() != 0 {
		i = r.healthy(i, time.Now().UnixNano())
	}
	return i
}

// buildSnapshot builds the snapshot of a validated table t, taking backends
// from reg, and returns the set of backend addresses it references.
func buildSnapshot(t routetable.Table, reg *registry, m *metrics) (*snapshot, map[string]struct{}) {
	s := &snapshot{
		generation: t.Generation,
		exact:      make(map[string]*httpRoute, len(t.HTTP)),
		tcp:        append([]routetable.L4Route(nil), t.TCP...),
		udp:        append([]routetable.L4Route(nil), t.UDP...),
		replaced:   make(chan struct{}),
	}
	referenced := make(map[string]struct{})
	for _, hr := range t.HTTP {
		r := &httpRoute{host: hr.Host, app: hr.App, service: hr.Service, next: new(atomic.Uint64),
			hold: hr.Hold, stopped: hr.Stopped, unavailable: hr.Unavailable, held: new(atomic.Int64),
			tls: hr.TLS, h2c: hr.Protocol == "h2c", hsts: hr.HSTS, guard: policy.NewGuard(hr), maint: policy.NewMaintenance(hr)}
		if r.tls == "" {
			r.tls = tlsAuto
		}
		r.slowPlain.Store(r.h2c)
		tm := upstream.Timeouts{
			Dial:           time.Duration(hr.DialTimeoutMS) * time.Millisecond,
			ResponseHeader: time.Duration(hr.ResponseHeaderTimeoutMS) * time.Millisecond,
		}
		if tm.ResponseHeader <= 0 {
			tm.ResponseHeader = reg.defaultTM.ResponseHeader // the edge's default (60 s)
		}
		r.timeouts = tm
		for _, b := range hr.Backends {
			be := reg.get(b.Addr)
			r.backends = append(r.backends, be)
			if r.h2c {
				r.proxies = append(r.proxies, reg.h2cProxyFor(be))
			} else {
				r.proxies = append(r.proxies, reg.proxyFor(be, tm))
			}
			rm := m.forRoute(hr.App, hr.Service, b.Addr)
			rm.instance, rm.backend = b.Container, be
			r.metrics = append(r.metrics, rm)
			referenced[b.Addr] = struct{}{}
		}
		if suffix, ok := strings.CutPrefix(hr.Host, "*"); ok {
			r.suffix = suffix
			s.wildcards = append(s.wildcards, r)
		} else {
			s.exact[hr.Host] = r
		}
	}
	sort.SliceStable(s.wildcards, func(i, j int) bool { return len(s.wildcards[i].suffix) > len(s.wildcards[j].suffix) })
	for _, l4 := range [][]routetable.L4Route{t.TCP, t.UDP} {
		for _, r := range l4 {
			for _, b := range r.L4Backends() { // none while held
				reg.get(b.Addr)
				referenced[b.Addr] = struct{}{}
			}
		}
	}
	return s, referenced
}

// normalizeHost strips the port and a trailing dot and lowercases (without
// allocating when already lowercase).
func normalizeHost(host string) string {
	host = stripPort(host)
	host = strings.TrimSuffix(host, ".")
	if !isLower(host) {
		host = strings.ToLower(host)
	}
	return host
}

// matchWildcard returns the longest-suffix wildcard route covering the
// normalized host, or nil.
func (s *snapshot) matchWildcard(host string) *httpRoute {
	for _, r := range s.wildcards {
		if len(host) > len(r.suffix) && strings.HasSuffix(host, r.suffix) {
			return r
		}
	}
	return nil
}

// stripPort removes a ":port" from a Host header value, including from
// bracketed IPv6 literals.
func stripPort(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			return host[1:i]
		}
		return host
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host, ':') == i {
		return host[:i]
	}
	return host
}

func isLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return true
}
