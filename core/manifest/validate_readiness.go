package manifest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// readinessApplies lists, per readiness type, the keys besides type that
// apply to it (ARCHITECTURE §8, SPEC R29–R35).
var readinessApplies = map[string][]string{
	"":                   {"timeout"},
	core.ReadinessNone:   {"timeout"},
	core.ReadinessHTTP:   {"path", "port", "host", "timeout"},
	core.ReadinessTCP:    {"port", "timeout"},
	core.ReadinessLog:    {"pattern", "timeout"},
	core.ReadinessPlugin: {"plugin", "config", "port", "timeout"},
	core.ReadinessDocker: {"timeout"},
}

// readinessUsers lists, per readiness key, the types it applies to.
var readinessUsers = map[string]string{
	"path":    `"http"`,
	"port":    `"http", "tcp" or "plugin"`,
	"host":    `"http"`,
	"pattern": `"log"`,
	"plugin":  `"plugin"`,
	"config":  `"plugin"`,
}

// readiness validates [services.<name>.readiness] against the service's
// interfaces.
func (v *validator) readiness(svcKey string, raw *rawReadiness, svc *core.ServiceSpec) core.Readiness {
	var r core.Readiness
	if raw == nil {
		return r
	}
	k := svcKey + ".readiness"
	if raw.Type != nil {
		r.Type = *raw.Type
	}
	applies, known := readinessApplies[r.Type]
	if !known {
		v.addf(k+".type", `unknown readiness type %q: want one of "none", "http", "tcp", "log", "plugin" or "docker"`, r.Type)
	}
	r.Timeout = v.duration(k+".timeout", raw.Timeout, minReadiness, maxReadiness)

	set := map[string]bool{
		"path": raw.Path != nil, "port": raw.Port != nil, "host": raw.Host != nil,
		"pattern": raw.Pattern != nil, "plugin": raw.Plugin != nil, "config": raw.Config != nil,
	}
	if known {
		for _, field := range []string{"path", "port", "host", "pattern", "plugin", "config"} {
			if set[field] && !slices.Contains(applies, field) {
				typ := fmt.Sprintf("type %q", r.Type)
				if r.Type == "" {
					typ = "an unset type (the implicit probe)"
				}
				v.addf(k+"."+field, "%s does not apply to %s: it is used only by type %s", field, typ, readinessUsers[field])
				set[field] = false
			}
		}
	}

	if set["port"] {
		if p := v.port(k+".port", raw.Port); p != 0 {
			if msg := declaredPort(svc, p); msg != "" && !internalTCPPort(svc, r.Type, p) {
				v.add(k+".port", msg)
			} else {
				r.Port = p
			}
		}
	}
	switch r.Type {
	case core.ReadinessHTTP:
		if set["path"] {
			if !isOriginPath(*raw.Path) {
				v.addf(k+".path", `invalid path %q: want an origin-form path starting with "/", e.g. "/healthz" (no spaces, no '#')`, *raw.Path)
			} else {
				r.Path = *raw.Path
			}
		}
		if set["host"] {
			if !isHostHeader(*raw.Host) {
				v.addf(k+".host", `invalid host %q: want a host name or IP, optionally with ":port", e.g. "blog.example.com"`, *raw.Host)
			} else {
				r.Host = *raw.Host
			}
		}
		if !set["port"] {
			v.implicitPort(k, r.Type, svc, true)
		}
	case core.ReadinessTCP:
		if !set["port"] {
			v.implicitPort(k, r.Type, svc, false)
		}
	case core.ReadinessLog:
		if raw.Pattern == nil || *raw.Pattern == "" {
			v.add(k+".pattern", `required for type "log": the text the probe waits for in the container's logs`)
		} else {
			r.Pattern = *raw.Pattern
		}
	case core.ReadinessDocker:
		if h := svc.Healthcheck; h != nil && !h.Enabled() {
			v.add(k+".type", `readiness "docker" waits for the container's healthcheck, but [`+svcKey+`.healthcheck] disables it: declare a test, or choose another readiness type`)
		}
	case core.ReadinessPlugin:
		switch {
		case raw.Plugin == nil:
			v.add(k+".plugin", `required for type "plugin": the probe plugin's name (gordon-probe-<name>), e.g. "redis"`)
		case !pluginNameRE.MatchString(*raw.Plugin):
			v.addf(k+".plugin", "invalid plugin name %q: want lowercase letters, digits or '-'", *raw.Plugin)
		default:
			r.Plugin = *raw.Plugin
		}
		if set["config"] {
			r.Config = raw.Config
		}
	}
	return r
}

// internalTCPPort reports whether p may be probed by tcp readiness as an
// internal-only port (R30): no interface of svc declares it, so nothing is
// published and the probe connects from a helper container on the app
// network (a redis or postgres only the app's other services reach).
func internalTCPPort(svc *core.ServiceSpec, typ string, p int) bool {
	if typ != core.ReadinessTCP {
		return false
	}
	for _, h := range svc.HTTP {
		if h.Port == p {
			return false
		}
	}
	for _, t := range svc.TCP {
		if t.Port == p {
			return false
		}
	}
	for _, u := range svc.UDP {
		if u.Port == p {
			return false
		}
	}
	return true
}

// declaredPort returns "" when p is one of svc's HTTP or TCP ports, else a
// message listing them.
func declaredPort(svc *core.ServiceSpec, p int) string {
	var ports []int
	for _, h := range svc.HTTP {
		ports = appendUnique(ports, h.Port)
	}
	for _, t := range svc.TCP {
		ports = appendUnique(ports, t.Port)
	}
	if slices.Contains(ports, p) {
		return ""
	}
	for _, u := range svc.UDP {
		if u.Port == p {
			return fmt.Sprintf("port %d is declared only as UDP; readiness probes connect over TCP: want one of %s", p, portList(ports))
		}
	}
	if len(ports) == 0 {
		return fmt.Sprintf("port %d is not declared: this service declares no HTTP or TCP port to probe", p)
	}
	return fmt.Sprintf("port %d is not declared by this service: want one of %s", p, portList(ports))
}

// implicitPort checks that a declared http or tcp probe without a port has
// exactly one port to probe (SPEC R30): for http the single public HTTP port
// when there is no TCP interface, else (both) the single TCP-capable port
// (public HTTP or TCP).
func (v *validator) implicitPort(k, typ string, svc *core.ServiceSpec, httpFirst bool) {
	var public, capable []int
	for _, h := range svc.HTTP {
		if h.Public() {
			public = appendUnique(public, h.Port)
			capable = appendUnique(capable, h.Port)
		}
	}
	for _, t := range svc.TCP {
		capable = appendUnique(capable, t.Port)
	}
	if httpFirst && len(svc.TCP) == 0 && len(public) == 1 {
		return
	}
	switch len(capable) {
	case 1:
		return
	case 0:
		var internal []int
		for _, h := range svc.HTTP {
			if !h.Public() && h.Port != 0 {
				internal = appendUnique(internal, h.Port)
			}
		}
		if len(internal) > 0 {
			v.addf(k+".port", "readiness type %q has no published port to probe: set port to the internal HTTP port to check (%s; probed from a helper container on the app network)", typ, portList(internal))
			return
		}
		if typ == core.ReadinessTCP {
			v.addf(k+".port", "readiness type %q needs a port: set port to the port to probe (an internal-only port is probed from a helper container on the app network), or declare a [[%s.tcp]] or public [[%s.http]] interface", typ, parentKey(k), parentKey(k))
			return
		}
		v.addf(k+".port", "readiness type %q needs a port: declare a [[%s.tcp]] or public [[%s.http]] interface, or use type \"log\"", typ, parentKey(k), parentKey(k))
	default:
		v.addf(k+".port", "readiness type %q cannot choose between ports %s: set port to the one to probe", typ, portList(capable))
	}
}

// isOriginPath reports whether p is an HTTP origin-form path: it starts with
// "/" and has no whitespace, control characters or fragment.
func isOriginPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	return !strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '#' })
}

func appendUnique(list []int, x int) []int {
	if x == 0 || slices.Contains(list, x) {
		return list
	}
	return append(list, x)
}

func portList(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}
