package dataplane

import (
	"net/http/httputil"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/edgetls"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// Snapshot is one applied route table, immutable once built (STYLE "What we
// take" 12, "What to avoid" 7): the request path reads it through an
// atomic.Pointer without any lock.
type Snapshot struct {
	Generation uint64
	// Exact maps a lowercase host to its route.
	Exact map[string]*HTTPRoute
	// Wildcards are "*.suffix" routes ordered by suffix length, longest first.
	Wildcards []*HTTPRoute
	TCP       []routetable.L4Route
	UDP       []routetable.L4Route
	// Replaced is closed when the next snapshot is swapped in: held
	// requests wait on it (SPEC R58).
	Replaced chan struct{}
}

// HTTPRoute is one HTTP host and the backends serving it.
type HTTPRoute struct {
	Host string
	// Suffix is ".example.com" for "*.example.com", "" for exact hosts.
	Suffix   string
	App      string
	Service  string
	Backends []*Backend
	// Proxies[i] is the reverse proxy to backends[i] with this route's
	// timeouts (shared with the backend's default proxy when it has none).
	Proxies []*httputil.ReverseProxy
	// Timeouts are the route's optional upstream timeouts.
	Timeouts upstream.Timeouts
	// Metrics[i] are the precomputed series of backends[i].
	Metrics []*RouteMetrics
	// next spreads requests over backends (more than one only transiently).
	next *atomic.Uint64
	// Hold is set while the service is between generations, stopped when
	// it is stopped (both without backends, SPEC R58); held counts the
	// requests waiting on this route.
	Hold    *routetable.Hold
	Stopped bool
	// Unavailable: the app runs but no instance is ready (503, not 404).
	Unavailable bool
	// Asleep is set while the service sleeps (SPEC R81): a request asks
	// for a wake and is held.
	Asleep *routetable.Asleep
	Held   *atomic.Int64
	// TLS is the HTTPS policy ("auto", "always", "never"; tls.go), H2C
	// whether backends speak cleartext HTTP/2 (H2.go).
	TLS string
	H2C bool
	// HSTS is the Strict-Transport-Security value of the route's HTTPS
	// answers ("": none).
	HSTS string
	// SlowPlain sends this host's plain HTTP requests to ServeHTTP instead
	// of the event loop (redirects, H2C); set by tlsEdge.annotate.
	SlowPlain atomic.Bool
	// Guard is the route's allow and basic_auth rules (internal/policy; nil:
	// none); a guarded route is served by ServeHTTP only.
	Guard *policy.Guard
	// Maint is the route's maintenance mode (internal/policy; nil: none);
	// a route in maintenance is served by ServeHTTP only.
	Maint *policy.Maintenance
}

// Pick returns the index of the backend for one request (into backends,
// proxies and metrics): round-robin, skipping ejected backends (health.go;
// the healthy case costs one atomic load and no clock read).
func (r *HTTPRoute) Pick() int {
	if len(r.Backends) == 1 {
		return 0
	}
	i := int(r.next.Add(1) % uint64(len(r.Backends)))
	if r.Backends[i].Health.Until() != 0 {
		i = r.healthy(i, time.Now().UnixNano())
	}
	return i
}

// BuildSnapshot builds the snapshot of a validated table t, taking backends
// from reg, and returns the set of backend addresses it references.
func BuildSnapshot(t routetable.Table, reg *Registry, m *Metrics) (*Snapshot, map[string]struct{}) {
	s := &Snapshot{
		Generation: t.Generation,
		Exact:      make(map[string]*HTTPRoute, len(t.HTTP)),
		TCP:        append([]routetable.L4Route(nil), t.TCP...),
		UDP:        append([]routetable.L4Route(nil), t.UDP...),
		Replaced:   make(chan struct{}),
	}
	referenced := make(map[string]struct{})
	for _, hr := range t.HTTP {
		r := &HTTPRoute{Host: hr.Host, App: hr.App, Service: hr.Service, next: new(atomic.Uint64),
			Hold: hr.Hold, Stopped: hr.Stopped, Unavailable: hr.Unavailable, Asleep: hr.Asleep, Held: new(atomic.Int64),
			TLS: hr.TLS, H2C: hr.Protocol == "h2c", HSTS: hr.HSTS, Guard: policy.NewGuard(hr), Maint: policy.NewMaintenance(hr)}
		if r.TLS == "" {
			r.TLS = TLSAuto
		}
		r.SlowPlain.Store(r.H2C)
		tm := upstream.Timeouts{
			Dial:           time.Duration(hr.DialTimeoutMS) * time.Millisecond,
			ResponseHeader: time.Duration(hr.ResponseHeaderTimeoutMS) * time.Millisecond,
		}
		if tm.ResponseHeader <= 0 {
			tm.ResponseHeader = reg.DefaultTM.ResponseHeader // the edge's default (60 s)
		}
		r.Timeouts = tm
		for _, b := range hr.Backends {
			be := reg.Get(b.Addr)
			r.Backends = append(r.Backends, be)
			if r.H2C {
				r.Proxies = append(r.Proxies, reg.h2cProxyFor(be))
			} else {
				r.Proxies = append(r.Proxies, reg.proxyFor(be, tm))
			}
			rm := m.forRoute(hr.App, hr.Service, b.Addr)
			rm.instance, rm.backend = b.Container, be
			r.Metrics = append(r.Metrics, rm)
			referenced[b.Addr] = struct{}{}
		}
		if suffix, ok := strings.CutPrefix(hr.Host, "*"); ok {
			r.Suffix = suffix
			s.Wildcards = append(s.Wildcards, r)
		} else {
			s.Exact[hr.Host] = r
		}
	}
	sort.SliceStable(s.Wildcards, func(i, j int) bool { return len(s.Wildcards[i].Suffix) > len(s.Wildcards[j].Suffix) })
	for _, l4 := range [][]routetable.L4Route{t.TCP, t.UDP} {
		for _, r := range l4 {
			for _, b := range r.L4Backends() { // none while held
				reg.Get(b.Addr)
				referenced[b.Addr] = struct{}{}
			}
		}
	}
	return s, referenced
}

// NormalizeHost strips the port and a trailing dot and lowercases (without
// allocating when already lowercase).
func NormalizeHost(host string) string {
	host = StripPort(host)
	host = strings.TrimSuffix(host, ".")
	if !isLower(host) {
		host = strings.ToLower(host)
	}
	return host
}

// MatchWildcard returns the longest-suffix wildcard route covering the
// normalized host, or nil.
func (s *Snapshot) MatchWildcard(host string) *HTTPRoute {
	for _, r := range s.Wildcards {
		if len(host) > len(r.Suffix) && strings.HasSuffix(host, r.Suffix) {
			return r
		}
	}
	return nil
}

// StripPort removes a ":port" from a Host header value, including from
// bracketed IPv6 literals.
func StripPort(host string) string {
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

// TLS policies (routetable.HTTPRoute.TLS).
const (
	TLSAuto   = "auto"
	TLSAlways = "always"
	TLSNever  = "never"
)

// Route is how s routes name, for the certificates (edgetls.Table).
func (s *Snapshot) Route(name string) (edgetls.Route, bool) {
	r, exact := s.Exact[name]
	if !exact {
		if r = s.MatchWildcard(name); r == nil {
			return edgetls.Route{}, false
		}
	}
	return edgetls.Route{Exact: exact, HTTPS: r.TLS != TLSNever}, true
}

// ExactHTTPS calls fn with every exact host of s served over HTTPS
// (edgetls.Table).
func (s *Snapshot) ExactHTTPS(fn func(host string)) {
	for name, r := range s.Exact {
		if r.TLS != TLSNever {
			fn(name)
		}
	}
}
