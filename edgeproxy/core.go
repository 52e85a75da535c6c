package edgeproxy

import (
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/hashicorp/go-hclog"
)

// proxyCore is the state the HTTP/1.1 serving path reads on every request:
// the current route snapshot, the host cache, the backend registry, the
// metrics and the connection server.
type proxyCore struct {
	logger hclog.Logger
	snap   atomic.Pointer[snapshot]
	// hosts caches wildcard and unknown-host resolutions (route).
	hosts   *ristretto.Cache[string, hostEntry]
	metrics *metrics
	reg     *registry
	cs      *connServer
	// tlsp is the HTTPS edge once it serves (nil: no HTTPS listener).
	tlsp tlsSide
}

// tlsSide is what the HTTP/1.1 path asks of the HTTPS edge (tls.go).
type tlsSide interface {
	// servesTLS reports whether an HTTPS request for host on rt is proxied
	// by the loops (false: ServeHTTP answers it).
	servesTLS(rt *httpRoute, host []byte) bool
	// countHTTPS counts an HTTPS request by protocol (protoH1, protoH2).
	countHTTPS(proto int)
	// handoffConns takes the TLS connections the loops do not serve.
	handoffConns() *handoffListener
}
