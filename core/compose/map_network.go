package compose

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"

	"github.com/compose-spec/compose-go/v2/types"
)

// httpLikePorts are container ports that usually serve HTTP.
var httpLikePorts = map[int]bool{80: true, 3000: true, 5000: true, 8000: true, 8080: true, 8888: true}

// networks: project networks collapse into the app network; external ones
// are the app's shared networks, which every service joins.
func (m *mapper) networks(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name + ".networks"
	for _, net := range slices.Sorted(maps.Keys(svc.Networks)) {
		cfg := svc.Networks[net]
		if cfg != nil {
			for _, a := range cfg.Aliases {
				if a != name {
					out.Aliases = appendNew(out.Aliases, a)
					m.from(fmt.Sprintf("services.%s.aliases[%d]", name, len(out.Aliases)-1), base+"."+net+".aliases")
				}
			}
		}
		if cfg != nil && (cfg.Ipv4Address != "" || cfg.Ipv6Address != "" || cfg.MacAddress != "" || len(cfg.LinkLocalIPs) > 0 || len(cfg.DriverOpts) > 0 || cfg.InterfaceName != "") {
			m.refuse(base+"."+net, "network options (addresses, driver_opts, interface_name) cannot be honoured: a service is reached by its name and aliases on the app network; remove them (aliases are kept)")
		}
		def, ok := m.p.Networks[net]
		if ok && bool(def.External) {
			continue
		}
		if net != "default" && !m.networkNoted {
			m.networkNoted = true
			m.note("networks: every service joins the app network gordon-%s; the project networks (%s, ...) are not kept apart", m.p.Name, net)
		}
	}
	for net, def := range m.p.Networks {
		if !bool(def.External) {
			continue
		}
		if _, joined := svc.Networks[net]; !joined {
			m.note("%s: joins the external network %s too (shared networks are app-wide)", name, net)
		}
	}
}

// interfaces: routes (x-gordon, Traefik labels, VIRTUAL_HOST) become HTTP
// interfaces; other ports: become TCP/UDP interfaces published by the edge.
func (m *mapper) interfaces(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name
	routes := m.routes(name, svc, out)
	sort.SliceStable(routes, func(i, j int) bool { return routes[i].port < routes[j].port })
	routed := map[int]string{} // container port -> its first host
	seen := map[string]bool{}
	for _, r := range routes {
		if seen[r.host] {
			continue // the same host from two sources (x-gordon and a label)
		}
		seen[r.host] = true
		if _, ok := routed[r.port]; !ok {
			routed[r.port] = r.host
		}
		out.HTTP = append(out.HTTP, httpIface{Port: r.port, Host: r.host, TLS: r.tls, BasicAuth: r.access.basicAuth, Allow: r.access.allow})
		m.from(fmt.Sprintf("%s.http[%d]", base, len(out.HTTP)-1), r.origin)
	}
	for i, pc := range svc.Ports {
		key := m.writtenKey(fmt.Sprintf("%s.ports[%d]", base, i), base+".ports")
		proto := pc.Protocol
		if proto == "" {
			proto = "tcp"
		}
		if host, ok := routed[int(pc.Target)]; ok && proto == "tcp" {
			if pc.Published != "" {
				m.note("%s: port %s:%d is served by the edge as http://%s (the host port is not published)", name, pc.Published, pc.Target, host)
			}
			continue
		}
		if proto != "tcp" && proto != "udp" {
			m.refuse(key, "protocol %s cannot be honoured: the edge relays tcp and udp", proto)
			continue
		}
		if pc.Published == "" {
			m.refuse(key, "port %d has no host port: compose would publish a random one; write \"HOST:%d\" to publish it through the edge, or drop it (other services reach %s:%d on the app network)", pc.Target, pc.Target, name, pc.Target)
			continue
		}
		pub, err := strconv.Atoi(pc.Published)
		if err != nil {
			m.refuse(key, "host port %q cannot be honoured: publish one port per entry (no ranges)", pc.Published)
			continue
		}
		ip := pc.HostIP
		if ip == "" {
			ip = "0.0.0.0"
		}
		addr := net.JoinHostPort(ip, strconv.Itoa(pub))
		iface := l4Iface{Port: int(pc.Target), Publish: addr}
		if proto == "udp" {
			out.UDP = append(out.UDP, iface)
			m.from(fmt.Sprintf("%s.udp[%d]", base, len(out.UDP)-1), key)
		} else {
			out.TCP = append(out.TCP, iface)
			m.from(fmt.Sprintf("%s.tcp[%d]", base, len(out.TCP)-1), key)
			if len(routes) == 0 && httpLikePorts[int(pc.Target)] {
				m.note("%s: port %d is relayed as raw TCP on %s; to route it by host through the edge's HTTP, set x-gordon.host", name, pc.Target, addr)
			}
		}
	}
}
