package dataplane

import (
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// h2cPool holds one cleartext HTTP/2 transport per backend address, for
// routes whose interface declares protocol = "H2C" (gRPC): requests reach
// the backend over prior-knowledge HTTP/2, trailers included, from either
// listener. Drain accounting is ServeHTTP's, as for every other route.
type h2cPool struct {
	mu sync.Mutex
	m  map[string]*http.Transport
}

func (p *h2cPool) get(addr string, dialTimeout, idleTimeout time.Duration) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if tr := p.m[addr]; tr != nil {
		return tr
	}
	if p.m == nil {
		p.m = map[string]*http.Transport{}
	}
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:              nil,
		DialContext:        dialer.DialContext,
		Protocols:          protos,
		IdleConnTimeout:    idleTimeout,
		DisableCompression: true,
	}
	p.m[addr] = tr
	return tr
}

// forget closes and drops addr's transport (backend evicted).
func (p *h2cPool) forget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if tr := p.m[addr]; tr != nil {
		tr.CloseIdleConnections()
		delete(p.m, addr)
	}
}

// h2cProxyFor returns a reverse proxy to b over cleartext HTTP/2 (the
// route's timeouts other than the dial timeout do not apply).
func (r *Registry) h2cProxyFor(b *Backend) *httputil.ReverseProxy {
	p := r.newProxy(b, upstream.Timeouts{})
	p.Transport = r.h2c.get(b.Addr, r.dialTimeout, r.IdleTimeout)
	return p
}
