package manifest

import (
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Name rules. Every message that uses one says what would be valid.
var (
	dnsLabelRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secretNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-][a-zA-Z0-9_.-]*$`)
	dockerNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
	pluginNameRE = regexp.MustCompile(`^[a-z0-9-]+$`)
)

const (
	dnsLabelRule   = "want a DNS label: 1-63 lowercase letters, digits or '-', not starting or ending with '-'"
	envNameRule    = "want a letter or '_' followed by letters, digits or '_'"
	secretNameRule = "want letters, digits, '_', '.' or '-', not starting with '.'"
	dockerNameRule = "want a letter or digit followed by letters, digits, '_', '.' or '-'"
	hostRule       = `want a lowercase DNS name such as "blog.example.com" or a wildcard such as "*.example.com", without scheme, port or path`
	portRule       = "want a port number from 1 to 65535"
	publishRule    = `want "IP:port" with an IPv4 address or a bracketed IPv6 address and a port from 1 to 65535, e.g. "0.0.0.0:9000" or "[::]:9000"`
	mountPathRule  = "/, /proc, /sys, /dev and /run/secrets (and anything below the last four) cannot be mount targets"
)

// Duration bounds (SPEC section 4).
const (
	minStopGrace = time.Second
	maxStopGrace = 5 * time.Minute
	minReadiness = time.Second
	maxReadiness = 10 * time.Minute
)

// validator collects every problem of one manifest.
type validator struct {
	idx      *keyIndex
	problems []Problem

	// App-wide uniqueness: public host -> key of its first interface, and
	// published listen addresses per protocol.
	hosts   map[string]string
	publish map[string][]published
	// depKeys maps service+"\x00"+dependency to its depends_on key.
	depKeys map[string]string
}

// published is one edge listen address already taken.
type published struct {
	ip   net.IP
	port int
	addr string
	key  string
}

// add records a problem at key's position (or its nearest parent's).
func (v *validator) add(key, msg string) {
	at := v.idx.lookup(key)
	v.problems = append(v.problems, Problem{Line: at.Line, Column: at.Column, Key: key, Message: msg})
}

// addf is add with a format.
func (v *validator) addf(key, format string, args ...any) { v.add(key, fmt.Sprintf(format, args...)) }

// app validates the whole document and builds the spec (not yet normalized).
func (v *validator) app(raw rawApp) core.AppSpec {
	v.hosts = map[string]string{}
	v.publish = map[string][]published{}
	var spec core.AppSpec
	switch {
	case raw.Name == nil:
		v.add("name", `required: the app name, a DNS label such as "blog"`)
	case !dnsLabelRE.MatchString(*raw.Name):
		v.addf("name", "invalid app name %q: %s", *raw.Name, dnsLabelRule)
	default:
		spec.Name = *raw.Name
	}
	spec.Env = v.env("env", raw.Env)
	spec.Networks = v.networks(raw.Networks)
	if len(raw.Services) == 0 {
		v.add("services", "at least one service is required: add a [services.<name>] table with an image")
	}
	for _, name := range v.sourceOrder("services", raw.Services) {
		spec.Services = append(spec.Services, v.service(name, raw.Services[name], spec.Env))
	}
	v.dependencies(spec.Services)
	return spec
}

// sourceOrder returns the service names in the order they appear in the
// source (names not located last, by name), so "already used by" problems
// land on the later occurrence.
func (v *validator) sourceOrder(prefix string, m map[string]rawService) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	sort.SliceStable(names, func(i, j int) bool {
		a, b := v.idx.lookup(prefix+"."+names[i]), v.idx.lookup(prefix+"."+names[j])
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line == 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return names
}

// networks validates the shared network names.
func (v *validator) networks(raw []string) []string {
	seen := map[string]string{}
	var out []string
	for i, n := range raw {
		k := fmt.Sprintf("networks[%d]", i)
		switch {
		case !dockerNameRE.MatchString(n):
			v.addf(k, "invalid network name %q: %s", n, dockerNameRule)
		case seen[n] != "":
			v.addf(k, "network %q is already listed at %s", n, seen[n])
		default:
			seen[n] = k
			out = append(out, n)
		}
	}
	return out
}

// env validates an env table; the result is never nil.
func (v *validator) env(key string, raw map[string]any) map[string]string {
	out := map[string]string{}
	for _, name := range sortedKeys(raw) {
		k := key + "." + name
		val := raw[name]
		if !envNameRE.MatchString(name) {
			v.addf(k, "invalid environment variable name %q: %s", name, envNameRule)
			continue
		}
		s, ok := val.(string)
		if !ok {
			switch val.(type) {
			case int64, float64, bool:
				v.addf(k, "value must be a string, got %s: quote it, e.g. %s = \"%v\"", tomlType(val), name, val)
			default:
				v.addf(k, "value must be a string, got %s", tomlType(val))
			}
			continue
		}
		if strings.ContainsRune(s, 0) {
			v.add(k, "value must not contain a NUL character")
			continue
		}
		out[name] = s
	}
	return out
}

// service validates one [services.<name>] table.
func (v *validator) service(name string, raw rawService, appEnv map[string]string) core.ServiceSpec {
	key := "services." + name
	svc := core.ServiceSpec{Name: name}
	if !dnsLabelRE.MatchString(name) {
		v.addf(key, "invalid service name %q: %s", name, dnsLabelRule)
	}
	if raw.Image == nil {
		v.add(key+".image", `required: the image reference, e.g. "registry.example/blog:1.4" or "name@sha256:<64 hex digits>"`)
	} else if msg := checkImage(*raw.Image); msg != "" {
		v.add(key+".image", msg)
	} else {
		svc.Image = *raw.Image
	}
	if raw.Command != nil {
		for i, a := range *raw.Command {
			if a == "" {
				v.addf(fmt.Sprintf("%s.command[%d]", key, i), "argument must be a non-empty string")
			}
		}
		svc.Command = append([]string{}, *raw.Command...)
	}
	svc.StopGrace = v.duration(key+".stop_grace", raw.StopGrace, minStopGrace, maxStopGrace)
	svc.Env = v.env(key+".env", raw.Env)
	svc.Secrets = v.secrets(key, raw.Secrets, svc.Env, appEnv)

	for _, list := range []string{"http", "tcp", "udp", "volume", "bind"} {
		if v.idx.tables[key+"."+list] {
			v.addf(key+"."+list, "wrong type: want an array of tables, written [[%s.%s]], got a table", key, list)
		}
	}
	tcpPorts := map[int]string{} // container port/tcp -> key of its first declaration
	publicHTTP := map[int]bool{} // ports declared only by public HTTP interfaces so far
	udpPorts := map[int]string{}
	for i, h := range raw.HTTP {
		svc.HTTP = append(svc.HTTP, v.http(fmt.Sprintf("%s.http[%d]", key, i), h, tcpPorts, publicHTTP))
	}
	svc.TCP = v.l4(key, "tcp", raw.TCP, tcpPorts)
	svc.UDP = v.l4(key, "udp", raw.UDP, udpPorts)
	svc.Healthcheck = v.healthcheck(key+".healthcheck", raw.Healthcheck)
	svc.Readiness = v.readiness(key, raw.Readiness, &svc)

	mounts := map[string]string{} // container path -> key of its first mount
	for i, m := range raw.Volume {
		k := fmt.Sprintf("%s.volume[%d]", key, i)
		vm := v.mount(k, "volume", m, mounts)
		svc.Volumes = append(svc.Volumes, core.VolumeMount{Name: vm.Name, Path: vm.Path, ReadOnly: vm.ReadOnly, Adopt: m.Adopt != nil && *m.Adopt})
	}
	for i, m := range raw.Bind {
		k := fmt.Sprintf("%s.bind[%d]", key, i)
		if m.Adopt != nil {
			v.add(k+".adopt", "adopt applies to volumes only: a bind mounts an operator-approved host path")
		}
		svc.Binds = append(svc.Binds, v.mount(k, "bind", m, mounts))
	}
	svc.Devices = v.devices(key, raw.Devices)
	v.containerKeys(key, raw, &svc)
	svc.Replace = v.replace(key+".replace", raw.Replace, &svc)
	svc.Run = v.run(key, raw.Run, &svc)
	return svc
}

// run validates run = "once": a one-shot service runs to completion at
// each deploy, so it serves nothing and has nothing to wait for.
func (v *validator) run(key string, raw *string, svc *core.ServiceSpec) string {
	if raw == nil {
		return ""
	}
	if *raw != core.RunOnce {
		v.addf(key+".run", `invalid run %q: want "once" (a one-shot run to completion at each deploy), or omit run for a service kept running`, *raw)
		return ""
	}
	const why = "a one-shot service (run = \"once\") runs to completion and serves nothing"
	for _, list := range []struct {
		name string
		n    int
	}{{"http", len(svc.HTTP)}, {"tcp", len(svc.TCP)}, {"udp", len(svc.UDP)}} {
		if list.n > 0 {
			v.addf(key+"."+list.name, "%s: remove its %s interfaces", why, list.name)
		}
	}
	if svc.Readiness.Type != "" && svc.Readiness.Type != core.ReadinessNone {
		v.addf(key+".readiness", "%s: it is waited for until it exits (status 0); remove readiness", why)
	}
	if svc.Healthcheck.Enabled() {
		v.addf(key+".healthcheck", "%s: remove healthcheck", why)
	}
	if svc.Replace != "" {
		v.addf(key+".replace", "%s: it is never replaced; remove replace", why)
	}
	return *raw
}

// replace validates the declared replacement flow (SPEC R16): "overlap"
// needs an overlap-eligible service, "sequential" is always allowed.
func (v *validator) replace(key string, raw *string, svc *core.ServiceSpec) string {
	if raw == nil {
		return ""
	}
	switch *raw {
	case core.ReplaceSequential:
	case core.ReplaceOverlap:
		if why := core.NotOverlapEligible(svc); why != "" {
			v.addf(key, `replace = "overlap" cannot be honoured: the service is replaced sequentially (%s), so two generations never run at once; remove replace or use "sequential"`, why)
		}
	default:
		v.addf(key, `invalid replace %q: want "overlap" (start the new generation before stopping the old; stateless services only) or "sequential" (stop the old one first)`, *raw)
	}
	return *raw
}

// checkImage returns "" for a plausible Docker image reference, else a
// message.
func checkImage(ref string) string {
	const want = `want e.g. "nginx:1.27", "registry.example:5000/team/app:1.4" or "name@sha256:<64 hex digits>"`
	if ref == "" {
		return "must not be empty; " + want
	}
	if strings.ContainsFunc(ref, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Sprintf("invalid image reference %q: contains whitespace or control characters; %s", ref, want)
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		var why string
		switch {
		case errors.Is(err, reference.ErrNameContainsUppercase), strings.Contains(err.Error(), "must be lowercase"):
			why = "repository name must be lowercase"
		case errors.Is(err, reference.ErrNameTooLong):
			why = fmt.Sprintf("name longer than %d characters", reference.NameTotalLengthMax)
		case errors.Is(err, reference.ErrDigestInvalidFormat), errors.Is(err, reference.ErrReferenceInvalidFormat), errors.Is(err, reference.ErrNameEmpty):
			why = "not of the form [registry[:port]/]name[:tag][@sha256:<64 hex digits>]"
		default:
			why = err.Error()
		}
		return fmt.Sprintf("invalid image reference %q: %s; %s", ref, why, want)
	}
	return ""
}

// duration parses an optional duration and checks its bounds; zero when
// absent or invalid.
func (v *validator) duration(key string, raw *string, lo, hi time.Duration) core.Duration {
	if raw == nil {
		return 0
	}
	d, err := time.ParseDuration(*raw)
	if err != nil {
		v.addf(key, "invalid duration %q: want a Go duration from %s to %s, such as \"30s\" or \"2m\"", *raw, fmtDuration(lo), fmtDuration(hi))
		return 0
	}
	if d < lo || d > hi {
		v.addf(key, "%s is out of range: want from %s to %s", *raw, fmtDuration(lo), fmtDuration(hi))
		return 0
	}
	return core.Duration(d)
}

// fmtDuration prints whole minutes as "5m" rather than "5m0s" and whole
// hours as "1h".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m") // "1h", not "1h0m"
	}
	return s
}

// secrets validates [services.<name>.secrets]: ENV = "secret-name" or
// ENV = { name = "...", as = "file" | "env" }.
func (v *validator) secrets(svcKey string, raw map[string]any, env, appEnv map[string]string) []core.SecretRef {
	var out []core.SecretRef
	files := map[string]string{} // secret name delivered as a file -> key
	for _, envKey := range sortedKeys(raw) {
		k := svcKey + ".secrets." + envKey
		ref := core.SecretRef{Env: envKey, As: "env"}
		nameKey := k
		ok := true
		nameGiven := false
		switch t := raw[envKey].(type) {
		case string:
			ref.Name = t
			nameGiven = true
		case map[string]any:
			for _, kk := range sortedKeys(t) {
				if kk != "name" && kk != "as" {
					v.addf(k+"."+kk, "unknown key %q: want one of %s", kk, strings.Join(secretKeys, ", "))
					ok = false
				}
			}
			nameKey = k + ".name"
			switch n := t["name"].(type) {
			case string:
				ref.Name = n
				nameGiven = true
			case nil:
				v.add(nameKey, `required: the secret's name, as given to "docker gordon secrets set"`)
				ok = false
			default:
				v.addf(nameKey, "must be a string, got %s", tomlType(n))
				ok = false
			}
			switch as := t["as"].(type) {
			case nil:
			case string:
				if as != "env" && as != "file" {
					v.addf(k+".as", `invalid delivery %q: want "env" (an environment variable) or "file" (/run/secrets/<name>)`, as)
					ok = false
				}
				ref.As = as
			default:
				v.addf(k+".as", `must be a string, "env" or "file", got %s`, tomlType(as))
				ok = false
			}
		default:
			v.addf(k, `want a secret name (a string) or an inline table { name = "...", as = "file" | "env" }, got %s`, tomlType(t))
			continue
		}
		if nameGiven {
			if !secretNameRE.MatchString(ref.Name) {
				v.addf(nameKey, "invalid secret name %q: %s", ref.Name, secretNameRule)
				ok = false
			}
		}
		switch ref.As {
		case "env":
			if !envNameRE.MatchString(envKey) {
				v.addf(k, "invalid environment variable name %q: %s", envKey, envNameRule)
				ok = false
			} else if _, dup := env[envKey]; dup {
				v.addf(k, "%s is also set in %s.env: a variable comes from env or from a secret, not both", envKey, svcKey)
				ok = false
			} else if _, dup := appEnv[envKey]; dup {
				v.addf(k, "%s is also set in the app-wide env: a variable comes from env or from a secret, not both", envKey)
				ok = false
			}
		case "file":
			if !secretNameRE.MatchString(envKey) {
				v.addf(k, "invalid secret file name %q: %s", envKey, secretNameRule)
				ok = false
			}
			if prev, dup := files[ref.Name]; dup && ref.Name != "" {
				v.addf(k, "secret %q is already delivered as a file by %s: each file secret must name a different secret", ref.Name, prev)
				ok = false
			} else {
				files[ref.Name] = k
			}
		}
		if ok {
			out = append(out, ref)
		}
	}
	return out
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
			if set[field] && !contains(applies, field) {
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
			if msg := declaredPort(svc, p); msg != "" {
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
	if contains(ports, p) {
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

// mount validates one volume or bind mount; kind is "volume" or "bind".
func (v *validator) mount(k, kind string, m rawMount, mounts map[string]string) core.BindMount {
	var out core.BindMount
	what := "volume name"
	if kind == "bind" {
		what = "bind name (the key of an operator-approved path in the bind policy)"
	}
	switch {
	case m.Name == nil:
		v.addf(k+".name", "required: the %s", what)
	case !dockerNameRE.MatchString(*m.Name):
		v.addf(k+".name", "invalid %s %q: %s", kind+" name", *m.Name, dockerNameRule)
	default:
		out.Name = *m.Name
	}
	if m.Path == nil {
		v.add(k+".path", `required: the absolute path inside the container, e.g. "/var/lib/data"`)
	} else if msg := checkMountPath(*m.Path); msg != "" {
		v.add(k+".path", msg)
	} else {
		out.Path = *m.Path
		if prev, dup := mounts[out.Path]; dup {
			v.addf(k+".path", "path %q is already mounted by %s: each container path takes one mount", out.Path, prev)
		} else {
			mounts[out.Path] = k
		}
	}
	if m.ReadOnly != nil {
		out.ReadOnly = *m.ReadOnly
	}
	return out
}

// checkMountPath returns "" for an absolute, clean, unreserved container
// path, else a message.
func checkMountPath(p string) string {
	if !path.IsAbs(p) {
		return fmt.Sprintf(`path %q must be absolute, e.g. "/var/lib/data"`, p)
	}
	if c := path.Clean(p); c != p {
		return fmt.Sprintf("path %q is not clean: want %q", p, c)
	}
	if p == "/" {
		return fmt.Sprintf("path %q is reserved: %s", p, mountPathRule)
	}
	for _, r := range []string{"/proc", "/sys", "/dev", "/run/secrets"} {
		if p == r || strings.HasPrefix(p, r+"/") {
			return fmt.Sprintf("path %q is reserved: %s", p, mountPathRule)
		}
	}
	return ""
}

// devices validates host device paths: absolute, clean, under /dev.
func (v *validator) devices(svcKey string, raw []string) []string {
	var out []string
	seen := map[string]string{}
	for i, d := range raw {
		k := fmt.Sprintf("%s.devices[%d]", svcKey, i)
		switch {
		case !strings.HasPrefix(d, "/dev/") || path.Clean(d) != d:
			v.addf(k, `invalid device %q: want a clean absolute path under /dev, e.g. "/dev/ttyUSB0"`, d)
		case seen[d] != "":
			v.addf(k, "device %q is already listed at %s", d, seen[d])
		default:
			seen[d] = k
			out = append(out, d)
		}
	}
	return out
}

// tomlType names the TOML type of a decoded value.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64, int:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		return "a date or time"
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains[T comparable](list []T, x T) bool {
	for _, y := range list {
		if y == x {
			return true
		}
	}
	return false
}

func appendUnique(list []int, x int) []int {
	if x == 0 || contains(list, x) {
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
