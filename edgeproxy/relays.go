package edgeproxy

import (
	"time"

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

// tcpDialRetryHook, when set (tests, before the edge is created), is
// called each time a relayed connection's connects all failed and it
// waits to retry (l4.TCPConfig.DialRetryHook).
var tcpDialRetryHook func()

// l4Backends is the registry as the TCP and UDP relays (internal/l4) use
// it: relayed connections count on the same backends as HTTP requests.
type l4Backends struct{ reg *registry }

func (r l4Backends) Get(addr string) l4.Backend { return r.reg.get(addr) }

// ConnectFailed ejects b (never the last instance: the relay checked).
func (r l4Backends) ConnectFailed(b l4.Backend, listen string) {
	r.reg.eject(b.(*backend), time.Now().UnixNano(), upstream.EjectConnect, "", listen)
}

func (r l4Backends) Retried(b l4.Backend) {
	if r.reg.metrics != nil {
		r.reg.metrics.retried(b.Addr())
	}
}

// Addr, Ejected, AddOpen and AddInFlight make a backend an l4.Backend.
func (b *backend) Addr() string            { return b.addr }
func (b *backend) Ejected(now int64) bool  { return b.health.Ejected(now) }
func (b *backend) AddOpen(delta int64)     { b.openConns.Add(delta) }
func (b *backend) AddInFlight(delta int64) { b.inFlight.Add(delta) }
