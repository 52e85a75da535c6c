package edgeproxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/l4"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// UDP session bounds (Config.UDPMaxSessions, UDPMaxSessionsPerSource).
const (
	// DefaultUDPMaxSessions bounds the sessions of one UDP listener.
	DefaultUDPMaxSessions = l4.DefaultUDPMaxSessions
	// DefaultUDPMaxSessionsPerSource bounds one source IP's sessions on a
	// listener (a client behind NAT uses several ports).
	DefaultUDPMaxSessionsPerSource = l4.DefaultUDPMaxSessionsPerSource
)

// registerRelayMetrics adds the relays' bounds to reg:
// gordon_edge_relay_connections (TCP connections and UDP sessions open),
// gordon_edge_relay_descriptors (their descriptors),
// gordon_edge_relay_descriptors_max (what they may use: the limit less the
// reserve) and gordon_edge_relay_refused_total (TCP connections closed at
// accept over a bound).
func registerRelayMetrics(reg *prometheus.Registry, tcp *l4.TCPRelays, b *l4.Budget) {
	_, maxFDs := b.Limits()
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "gordon_edge", Name: "relay_connections",
			Help: "TCP connections and UDP sessions the relays hold."}, func() float64 { c, _ := b.Used(); return float64(c) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "gordon_edge", Name: "relay_descriptors",
			Help: "Descriptors the relays' connections and sessions use."}, func() float64 { _, f := b.Used(); return float64(f) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "gordon_edge", Name: "relay_descriptors_max",
			Help: "Descriptors the relays may use: the process limit less the reserve left to HTTP."}, func() float64 { return float64(maxFDs) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "gordon_edge", Name: "relay_refused_total",
			Help: "TCP connections closed at accept because the route's max_conns, the relays' cap or their descriptors were reached."},
			func() float64 { return float64(tcp.Refused()) }),
	)
}

// tcpDialRetryHook, when set (tests, before the edge is created), is
// called each time a relayed connection's connects all failed and it
// waits to retry (l4.TCPConfig.DialRetryHook).
var tcpDialRetryHook func()

// l4Backends is the registry as the TCP and UDP relays (internal/l4) use
// it: relayed connections count on the same backends as HTTP requests.
type l4Backends struct{ reg *dataplane.Registry }

func (r l4Backends) Get(addr string) l4.Backend { return l4Backend{r.reg.Get(addr)} }

// ConnectFailed ejects b (never the last instance: the relay checked).
func (r l4Backends) ConnectFailed(b l4.Backend, listen string) {
	r.reg.Eject(b.(l4Backend).Backend, time.Now().UnixNano(), upstream.EjectConnect, "", listen)
}

func (r l4Backends) Retried(b l4.Backend) {
	if r.reg.Metrics != nil {
		r.reg.Metrics.Retried(b.Addr())
	}
}

// l4Backend is a backend as the relays see it (l4.Backend): one pointer,
// so making it an interface value does not allocate.
type l4Backend struct{ *dataplane.Backend }

func (b l4Backend) Addr() string            { return b.Backend.Addr }
func (b l4Backend) Ejected(now int64) bool  { return b.Health.Ejected(now) }
func (b l4Backend) AddOpen(delta int64)     { b.OpenConns.Add(delta) }
func (b l4Backend) AddInFlight(delta int64) { b.InFlight.Add(delta) }
