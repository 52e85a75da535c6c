package manifest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// published is one edge listen address already taken.
type published struct {
	ip   net.IP
	port int
	addr string
	key  string
}

// port checks a required container port.
func (v *validator) port(key string, raw *int) int {
	switch {
	case raw == nil:
		v.add(key, "required: the container port, "+portRule)
		return 0
	case *raw < 1 || *raw > 65535:
		v.addf(key, "invalid port %d: %s", *raw, portRule)
		return 0
	}
	return *raw
}

// Bounds of [[tcp]]/[[udp]] idle_timeout and max_conns.
const (
	minIdleTimeout = time.Second
	maxIdleTimeout = 24 * time.Hour
	maxL4Conns     = 100000
)

// Bounds of [[http]] response_timeout.
const (
	minResponseTimeout = time.Second
	maxResponseTimeout = time.Hour
)

// http validates one [[services.<name>.http]] interface.
// Several public interfaces (each with its own host) may share a container
// port; any other repeat of a port is refused.
func (v *validator) http(k string, h rawHTTP, tcpPorts map[int]string, publicHTTP map[int]bool) core.HTTPInterface {
	out := core.HTTPInterface{Port: v.port(k+".port", h.Port)}
	out.ResponseTimeout = v.duration(k+".response_timeout", h.ResponseTimeout, minResponseTimeout, maxResponseTimeout)
	public := h.Host != nil && (h.Visibility == nil || *h.Visibility == core.VisibilityPublic)
	if out.Port != 0 {
		if prev, dup := tcpPorts[out.Port]; dup && !(public && publicHTTP[out.Port]) {
			v.addf(k+".port", "port %d/tcp is already declared by %s", out.Port, prev)
		} else if !dup {
			tcpPorts[out.Port] = k
			publicHTTP[out.Port] = public
		}
	}
	hostOK := false
	if h.Host != nil {
		if !isHost(*h.Host) {
			v.addf(k+".host", "invalid host %q: %s", *h.Host, hostRule)
		} else {
			hostOK = true
		}
	}
	vis := ""
	if h.Visibility != nil {
		vis = *h.Visibility
	}
	switch vis {
	case "":
		if h.Host != nil {
			out.Visibility = core.VisibilityPublic
		} else {
			out.Visibility = core.VisibilityInternal
		}
	case core.VisibilityPublic:
		out.Visibility = vis
		if h.Host == nil {
			v.add(k+".visibility", `visibility "public" needs a host: set host = "app.example.com", or drop visibility to make the interface internal`)
		}
	case core.VisibilityInternal:
		out.Visibility = vis
		if h.Host != nil {
			v.add(k+".host", `an internal interface has no host: remove host, or set visibility = "public"`)
			hostOK = false
		}
	default:
		v.addf(k+".visibility", `invalid visibility %q: want "public" (with a host) or "internal" (without)`, vis)
	}
	if hostOK {
		out.Host = *h.Host
		if prev, dup := v.hosts[out.Host]; dup {
			v.addf(k+".host", "host %q is already routed by %s: a public host belongs to one interface of the app", out.Host, prev)
		} else {
			v.hosts[out.Host] = k
		}
	}
	v.httpTLS(k, h, &out)
	v.httpAccess(k, h, &out)
	return out
}

// httpTLS validates an interface's tls policy and backend protocol (R62):
// tls is "auto" (default), "always" or "never"; protocol is "http1"
// (default) or "h2c"; both need a public interface.
func (v *validator) httpTLS(k string, h rawHTTP, out *core.HTTPInterface) {
	if h.TLS != nil {
		switch *h.TLS {
		case core.TLSAuto, core.TLSAlways, core.TLSNever:
			out.TLS = *h.TLS
		default:
			v.addf(k+".tls", `invalid tls %q: want "auto" (certificate obtained, HTTP redirected once served), "always" (HTTP always redirected) or "never" (plain HTTP only)`, *h.TLS)
		}
		if out.Visibility == core.VisibilityInternal {
			v.add(k+".tls", `tls applies to a public interface: set host, or remove tls`)
		}
	}
	if h.Protocol != nil {
		switch *h.Protocol {
		case core.ProtocolHTTP1, core.ProtocolH2C:
			out.Protocol = *h.Protocol
		default:
			v.addf(k+".protocol", `invalid protocol %q: want "http1" (default) or "h2c" (cleartext HTTP/2 to the backend, e.g. gRPC)`, *h.Protocol)
		}
		if out.Visibility == core.VisibilityInternal {
			v.add(k+".protocol", `protocol applies to a public interface: set host, or remove protocol`)
		}
	}
	if h.HSTS != nil {
		switch {
		case !routetable.ValidHSTS(*h.HSTS):
			v.addf(k+".hsts", `invalid hsts %q: want "max-age=SECONDS", optionally followed by "; includeSubDomains" and "; preload"`, *h.HSTS)
		case out.Visibility == core.VisibilityInternal:
			v.add(k+".hsts", `hsts applies to a public interface: set host, or remove hsts`)
		case out.TLS == core.TLSNever:
			v.add(k+".hsts", `hsts needs HTTPS: remove hsts, or set tls to "auto" or "always"`)
		default:
			out.HSTS = *h.HSTS
		}
	}
}

// l4 validates the [[services.<name>.tcp]] or .udp interfaces.
func (v *validator) l4(svcKey, proto string, list []rawL4, ports map[int]string) []core.L4Interface {
	var out []core.L4Interface
	for i, raw := range list {
		k := fmt.Sprintf("%s.%s[%d]", svcKey, proto, i)
		iface := core.L4Interface{Port: v.port(k+".port", raw.Port)}
		if iface.Port != 0 {
			if prev, dup := ports[iface.Port]; dup {
				v.addf(k+".port", "port %d/%s is already declared by %s", iface.Port, proto, prev)
			} else {
				ports[iface.Port] = k
			}
		}
		if raw.Publish == nil {
			v.add(k+".publish", `required: the edge's listen address "IP:port", e.g. "0.0.0.0:9000"`)
		} else if ip, port, ok := parsePublish(*raw.Publish); !ok {
			v.addf(k+".publish", "invalid publish %q: %s", *raw.Publish, publishRule)
		} else {
			iface.Publish = *raw.Publish
			v.claimPublish(k+".publish", proto, published{ip: ip, port: port, addr: iface.Publish, key: k + ".publish"})
		}
		iface.IdleTimeout = v.duration(k+".idle_timeout", raw.IdleTimeout, minIdleTimeout, maxIdleTimeout)
		if raw.MaxConns != nil {
			if *raw.MaxConns < 1 || *raw.MaxConns > maxL4Conns {
				v.addf(k+".max_conns", "invalid max_conns %d: want from 1 to %d connections (or sessions) at once", *raw.MaxConns, maxL4Conns)
			} else {
				iface.MaxConns = *raw.MaxConns
			}
		}
		out = append(out, iface)
	}
	return out
}

// claimPublish records an edge listen address, reporting an overlap with
// one already taken for the same protocol anywhere in the app: same port and
// the same address, or a wildcard address that covers the other.
func (v *validator) claimPublish(key, proto string, p published) {
	for _, prev := range v.publish[proto] {
		if prev.port != p.port {
			continue
		}
		if prev.ip.Equal(p.ip) || covers(prev.ip, p.ip) || covers(p.ip, prev.ip) {
			v.addf(key, "publish %q (%s) overlaps %q of %s: an edge listen address serves one interface", p.addr, proto, prev.addr, prev.key)
			return
		}
	}
	v.publish[proto] = append(v.publish[proto], p)
}

// covers reports whether listening on wildcard would also take addr: an
// unspecified IPv4 address covers IPv4 addresses; "::" covers everything
// (dual stack).
func covers(wildcard, addr net.IP) bool {
	if !wildcard.IsUnspecified() {
		return false
	}
	if wildcard.To4() == nil {
		return true
	}
	return addr.To4() != nil
}

// parsePublish parses "IP:port" (IPv6 bracketed).
func parsePublish(s string) (net.IP, int, bool) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return nil, 0, false
	}
	ip := net.ParseIP(host)
	if ip == nil || strings.Contains(host, "%") {
		return nil, 0, false
	}
	bracketed := strings.HasPrefix(s, "[")
	if bracketed == (ip.To4() != nil && !strings.Contains(host, ":")) {
		// IPv4 must not be bracketed; IPv6 must be.
		return nil, 0, false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 || portStr != strconv.Itoa(port) {
		return nil, 0, false
	}
	return ip, port, true
}

// isHost reports whether s is a lowercase DNS name, optionally "*." + a DNS
// name.
func isHost(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if !dnsLabelRE.MatchString(label) {
			return false
		}
	}
	return true
}

// isHostHeader reports whether s is a host, optionally with ":port", usable
// as an HTTP Host header (decision 9).
func isHostHeader(s string) bool {
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 {
			return false
		}
		s = h
	}
	if net.ParseIP(s) != nil {
		return true
	}
	return !strings.HasPrefix(s, "*.") && isHost(s)
}
