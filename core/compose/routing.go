package compose

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// route is one public host routed to a container port.
type route struct {
	host   string
	port   int
	tls    string // "" (the manifest's default, auto), auto, always or never
	origin string // compose key path
	// access are the router's Traefik auth middlewares (middlewares.go).
	access access
}

// xGordonKeys are the keys of a service's x-gordon extension.
var xGordonKeys = map[string]bool{"host": true, "port": true, "tls": true, "readiness": true, "monitor": true, "node": true, "snapshots": true, "sleep_after": true, "wake_ignore": true}

// routes collects the hosts of a service from x-gordon, Traefik router
// labels and nginx-proxy's VIRTUAL_HOST, and sets the readiness x-gordon
// declares.
func (m *mapper) routes(name string, svc *types.ServiceConfig, out *service) []route {
	var rs []route
	rs = append(rs, m.xGordon(name, svc, out)...)
	rs = append(rs, m.traefik(name, svc)...)
	rs = append(rs, m.virtualHost(name, svc)...)
	return rs
}

// containerPorts are the distinct container ports a service declares
// (tcp ports: and expose:), ascending.
func containerPorts(svc *types.ServiceConfig) []int {
	seen := map[int]bool{}
	for _, p := range svc.Ports {
		if p.Protocol == "" || p.Protocol == "tcp" {
			seen[int(p.Target)] = true
		}
	}
	for _, e := range svc.Expose {
		s, _, _ := strings.Cut(e, "/")
		if n, err := strconv.Atoi(s); err == nil {
			seen[n] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// defaultPort is the single declared container port, or 0 with a reason.
func defaultPort(svc *types.ServiceConfig) (int, string) {
	ps := containerPorts(svc)
	switch len(ps) {
	case 1:
		return ps[0], ""
	case 0:
		return 0, "the service declares no container port (ports: or expose:)"
	}
	return 0, fmt.Sprintf("the service declares several container ports %v", ps)
}

func (m *mapper) xGordon(name string, svc *types.ServiceConfig, out *service) []route {
	base := "services." + name + ".x-gordon"
	rawAny, ok := svc.Extensions["x-gordon"]
	if !ok {
		return nil
	}
	raw, ok := rawAny.(map[string]any)
	if !ok {
		m.refuse(base, "x-gordon must be a mapping: { host: NAME, port: N, tls: auto, readiness: {...} }")
		return nil
	}
	keys := slices.Sorted(maps.Keys(raw))
	for _, k := range keys {
		if !xGordonKeys[k] {
			m.refuse(base+"."+k, "unknown x-gordon key %q: want host, port, tls, readiness, monitor, snapshots, node, sleep_after or wake_ignore", k)
		}
	}
	tlsPolicy := ""
	if tls, ok := raw["tls"]; ok {
		switch s, _ := tls.(string); s {
		case "auto", "always", "never":
			tlsPolicy = s
		default:
			m.refuse(base+".tls", "tls: %v: want auto (certificate, HTTP redirected once served), always (HTTP always redirected) or never (plain HTTP only)", tls)
		}
	}
	if r, ok := raw["readiness"]; ok {
		m.xReadiness(name, r, out)
	}
	if r, ok := raw["monitor"]; ok {
		m.xMonitor(name, r, out)
	}
	m.xSnapshots(name, raw, out)
	if n, ok := raw["node"]; ok {
		m.xNode(base, n, out)
	}
	m.xSleep(name, raw, out)
	var hosts []string
	switch h := raw["host"].(type) {
	case nil:
		if _, has := raw["host"]; has {
			m.refuse(base+".host", "host is empty: give a host name, e.g. shop.example.com")
		}
	case string:
		hosts = []string{h}
	case []any:
		for _, e := range h {
			s, ok := e.(string)
			if !ok {
				m.refuse(base+".host", "host must be a name or a list of names")
				return nil
			}
			hosts = append(hosts, s)
		}
	default:
		m.refuse(base+".host", "host must be a name or a list of names")
		return nil
	}
	if len(hosts) == 0 {
		if _, has := raw["port"]; has {
			m.refuse(base+".port", "port without host: give host too (an HTTP interface is routed by host)")
		}
		return nil
	}
	port := 0
	switch p := raw["port"].(type) {
	case nil:
		var why string
		if port, why = defaultPort(svc); port == 0 {
			m.refuse(base+".host", "which container port serves %s? %s: set x-gordon.port", hosts[0], why)
			return nil
		}
	case int:
		port = p
	case uint64:
		port = int(p)
	case float64:
		port = int(p)
	case string:
		n, err := strconv.Atoi(p)
		if err != nil {
			m.refuse(base+".port", "port %q: want a container port number", p)
			return nil
		}
		port = n
	default:
		m.refuse(base+".port", "port: want a container port number")
		return nil
	}
	var rs []route
	for i, h := range hosts {
		origin := base + ".host"
		if len(hosts) > 1 {
			origin = fmt.Sprintf("%s.host[%d]", base, i)
		}
		rs = append(rs, route{host: h, port: port, tls: tlsPolicy, origin: origin})
	}
	return rs
}

// xNode copies x-gordon.node, the node a swarm pins the service to, onto
// the manifest's node (which validates it).
func (m *mapper) xNode(base string, n any, out *service) {
	if s, ok := n.(string); ok && s != "" {
		out.Node = s
		return
	}
	m.refuse(base+".node", "node: %v: want a swarm node's hostname or ID, as docker node ls shows it", n)
}

// xReadiness copies x-gordon.readiness onto the manifest's readiness.
func (m *mapper) xReadiness(name string, r any, out *service) {
	base := "services." + name + ".x-gordon.readiness"
	raw, ok := r.(map[string]any)
	if !ok {
		m.refuse(base, "readiness must be a mapping, e.g. { type: http, path: /healthz }")
		return
	}
	rd := &readiness{}
	str := func(k string) string {
		v, ok := raw[k]
		if !ok {
			return ""
		}
		switch x := v.(type) {
		case string:
			return x
		case int, uint64, float64:
			return fmt.Sprint(x)
		}
		m.refuse(base+"."+k, "%s: want a string", k)
		return ""
	}
	for k, v := range raw {
		switch k {
		case "type":
			rd.Type = str(k)
		case "path":
			rd.Path = str(k)
		case "host":
			rd.Host = str(k)
		case "pattern":
			rd.Pattern = str(k)
		case "plugin":
			rd.Plugin = str(k)
		case "timeout":
			rd.Timeout = str(k)
		case "port":
			n, err := strconv.Atoi(str(k))
			if err != nil {
				m.refuse(base+".port", "port: want a container port number")
				continue
			}
			rd.Port = n
		case "config":
			c, ok := v.(map[string]any)
			if !ok {
				m.refuse(base+".config", "config: want a mapping")
				continue
			}
			rd.Config = c
		default:
			m.refuse(base+"."+k, "unknown readiness key %q: want type, path, port, host, pattern, plugin, config or timeout", k)
		}
		m.from("services."+name+".readiness."+k, base+"."+k)
	}
	m.from("services."+name+".readiness", base)
	out.Readiness = rd
}

var (
	traefikRuleRE = regexp.MustCompile(`^traefik\.http\.routers\.([^.]+)\.rule$`)
	traefikPortRE = regexp.MustCompile(`^traefik\.http\.services\.([^.]+)\.loadbalancer\.server\.port$`)
	traefikHostRE = regexp.MustCompile("^Host\\(\\s*((?:`[^`]+`\\s*,?\\s*)+)\\)$")
	backquotedRE  = regexp.MustCompile("`([^`]+)`")
)

// traefik reads Traefik v2/v3 router labels: rule=Host(`a`) [|| Host(`b`)],
// the router's service port (loadbalancer.server.port), and refuses what
// the edge cannot do in their place (non-Host rules, middlewares other
// than basic auth and IP allowlists, which routerAccess maps).
func (m *mapper) traefik(name string, svc *types.ServiceConfig) []route {
	labels := svc.Labels
	if v, ok := labels["traefik.enable"]; ok && strings.EqualFold(v, "false") {
		return nil
	}
	labelKey := func(k string) (string, string) {
		// map form: services.X.labels.KEY; list form: an element "KEY=...".
		p := "services." + name + ".labels." + k
		if m.ps.locate(p) != m.ps.locate("services."+name+".labels") {
			return p, ""
		}
		return "services." + name + ".labels", k + "="
	}
	refuseLabel := func(k, format string, args ...any) {
		p, item := labelKey(k)
		m.refuseAt(p, item, fmt.Sprintf(format, args...))
	}
	svcPorts := map[string]int{}
	keys := slices.Sorted(maps.Keys(labels))
	for _, k := range keys {
		if sm := traefikPortRE.FindStringSubmatch(k); sm != nil {
			n, err := strconv.Atoi(labels[k])
			if err != nil {
				refuseLabel(k, "port %q: want a container port number", labels[k])
				continue
			}
			svcPorts[sm[1]] = n
		}
	}
	var rs []route
	for _, k := range keys {
		if strings.HasPrefix(k, "traefik.tcp.") || strings.HasPrefix(k, "traefik.udp.") {
			refuseLabel(k, "Traefik TCP/UDP routers cannot be honoured: publish the port with ports: \"HOST:CONTAINER\" instead")
			continue
		}
		sm := traefikRuleRE.FindStringSubmatch(k)
		if sm == nil {
			continue
		}
		router := sm[1]
		hosts, ok := hostRule(labels[k])
		if !ok {
			refuseLabel(k, "rule %q cannot be honoured: the edge routes by Host only; write Host(`name`) (several joined by ||)", labels[k])
			continue
		}
		port := 0
		if s, ok := labels["traefik.http.routers."+router+".service"]; ok {
			port = svcPorts[s]
		} else if len(svcPorts) == 1 {
			for _, p := range svcPorts {
				port = p
			}
		}
		if port == 0 {
			var why string
			if port, why = defaultPort(svc); port == 0 {
				refuseLabel(k, "which container port serves router %s? %s: add the label traefik.http.services.%s.loadbalancer.server.port", router, why, router)
				continue
			}
		}
		var acc access
		if mwKey := "traefik.http.routers." + router + ".middlewares"; labels[mwKey] != "" {
			// A refusal fails the whole load; the route is still kept so
			// that it causes no second problem (its port unpublished).
			acc, _ = m.routerAccess(name, labels[mwKey], func(format string, args ...any) { refuseLabel(mwKey, format, args...) })
		}
		p, _ := labelKey(k)
		for _, h := range hosts {
			rs = append(rs, route{host: h, port: port, origin: p, access: acc})
		}
	}
	return rs
}

// hostRule parses Host(`a`) [|| Host(`b`, `c`)]; ok is false for any other
// matcher.
func hostRule(rule string) ([]string, bool) {
	var hosts []string
	for _, part := range strings.Split(rule, "||") {
		part = strings.TrimSpace(part)
		sm := traefikHostRE.FindStringSubmatch(part)
		if sm == nil {
			return nil, false
		}
		for _, q := range backquotedRE.FindAllStringSubmatch(sm[1], -1) {
			hosts = append(hosts, strings.ToLower(q[1]))
		}
	}
	return hosts, len(hosts) > 0
}

// virtualHost reads nginx-proxy's VIRTUAL_HOST (comma-separated) and
// VIRTUAL_PORT (default: the single declared port, else 80).
func (m *mapper) virtualHost(name string, svc *types.ServiceConfig) []route {
	v := svc.Environment["VIRTUAL_HOST"]
	if v == nil || strings.TrimSpace(*v) == "" {
		return nil
	}
	origin := "services." + name + ".environment.VIRTUAL_HOST"
	if m.ps.locate(origin) == m.ps.locate("services."+name+".environment") {
		origin = "services." + name + ".environment"
	}
	port := 0
	if vp := svc.Environment["VIRTUAL_PORT"]; vp != nil {
		n, err := strconv.Atoi(*vp)
		if err != nil {
			m.refuse(origin, "VIRTUAL_PORT %q: want a container port number", *vp)
			return nil
		}
		port = n
	} else if p, _ := defaultPort(svc); p != 0 {
		port = p
	} else {
		port = 80
	}
	var rs []route
	for _, h := range strings.Split(*v, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		rs = append(rs, route{host: strings.ToLower(h), port: port, origin: origin})
	}
	return rs
}
