package dataplane

import (
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/handoff"
	"github.com/hashicorp/go-hclog"
)

// Core is the state the HTTP/1.1 serving path reads on every request:
// the current route snapshot, the host cache, the backend registry, the
// metrics and the connection server.
type Core struct {
	Logger hclog.Logger
	Snap   atomic.Pointer[Snapshot]
	// Hosts caches wildcard and unknown-host resolutions (route).
	Hosts   *ristretto.Cache[string, HostEntry]
	Metrics *Metrics
	Reg     *Registry
	ConnSrv *ConnServer
	// HTTPS is the HTTPS edge once it serves (nil: no HTTPS listener).
	HTTPS TLSSide
}

// TLSSide is what the HTTP/1.1 path asks of the HTTPS edge (the root's tls.go).
type TLSSide interface {
	// ServesTLS reports whether an HTTPS request for host on rt is proxied
	// by the loops (false: ServeHTTP answers it).
	ServesTLS(rt *HTTPRoute, host []byte) bool
	// CountHTTPS counts an HTTPS request by protocol (protoH1, ProtoH2).
	CountHTTPS(proto int)
	// HandoffConns takes the TLS connections the loops do not serve.
	HandoffConns() *handoff.HandoffListener
}
