package edgeproxy

import (
	"net/netip"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
)

// DetectContainerNets is Config.ContainerNets for gordon-edge run: the
// subnets of Docker's bridges on this host, or every network of the
// edge's own namespace when it runs as a container with one (a swarm
// edge task); see policy.DetectContainerNets.
func DetectContainerNets() []netip.Prefix { return policy.DetectContainerNets() }

// narrowTrusted takes out of cfg.TrustedProxies every container network
// (cfg.ContainerNets) and every block of Docker's address pools lying
// strictly inside an entry, so an app container is never a trusted proxy
// (policy.Narrow); what it took out is logged once.
func narrowTrusted(cfg *Config) {
	if cfg.ContainerNets == nil || len(cfg.TrustedProxies) == 0 {
		return
	}
	nets := append(cfg.ContainerNets(), policy.DockerPools()...)
	out, removed := policy.Narrow(cfg.TrustedProxies, nets)
	if len(removed) == 0 {
		return
	}
	cfg.Logger.Warn("--trusted-proxies covers networks app containers have addresses on; they are not trusted (list the proxies' own addresses, or the container network itself, to trust one)",
		"trusted", cfg.TrustedProxies, "not_trusted", removed)
	cfg.TrustedProxies = out
}

// narrowAllow returns t for the serving snapshot with the container
// networks (Config.ContainerNets, read now) strictly inside a route's
// allow or maintenance allow entry taken out of that entry: a broad range
// does not admit app containers, a container network named explicitly
// does. t's slices are not modified.
func (s *Server) narrowAllow(t routetable.Table) routetable.Table {
	if s.cfg.ContainerNets == nil {
		return t
	}
	nets := s.cfg.ContainerNets()
	if len(nets) == 0 {
		return t
	}
	routes := make([]routetable.HTTPRoute, len(t.HTTP))
	for i, hr := range t.HTTP {
		if a, changed := policy.NarrowAllow(hr.Allow, nets); changed {
			hr.Allow = a
		}
		if m := hr.Maintenance; m != nil {
			if a, changed := policy.NarrowAllow(m.Allow, nets); changed {
				mm := *m
				mm.Allow = a
				hr.Maintenance = &mm
			}
		}
		routes[i] = hr
	}
	t.HTTP = routes
	return t
}
