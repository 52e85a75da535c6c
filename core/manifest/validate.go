package manifest

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Name rules. Every message that uses one says what would be valid.
var (
	dnsLabelRE   = newLazyRE(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	envNameRE    = newLazyRE(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secretNameRE = newLazyRE(`^[a-zA-Z0-9_-][a-zA-Z0-9_.-]*$`)
	dockerNameRE = newLazyRE(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
	pluginNameRE = newLazyRE(`^[a-z0-9-]+$`)
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
	case ReservedAppName(*raw.Name):
		v.addf("name", "app name %q is reserved: %s", *raw.Name, reservedAppRule)
	default:
		spec.Name = *raw.Name
	}
	spec.Env = v.env("env", raw.Env)
	spec.Networks = v.networks(raw.Networks)
	spec.Registry = v.registry(raw.Registry)
	spec.Notify = v.notify(raw.Notify)
	if len(raw.Services) == 0 {
		v.add("services", "at least one service is required: add a [services.<name>] table with an image")
	}
	for _, name := range v.sourceOrder("services", raw.Services) {
		spec.Services = append(spec.Services, v.service(name, raw.Services[name], spec.Env))
	}
	v.dependencies(spec.Services)
	v.sleepers(spec.Services)
	v.aliasClashes(spec.Services)
	spec.Jobs = v.jobs(raw.Jobs, spec.Services)
	return spec
}

// sourceOrder returns the service names in the order they appear in the
// source (names not located last, by name), so "already used by" problems
// land on the later occurrence.
func (v *validator) sourceOrder(prefix string, m map[string]rawService) []string {
	names := slices.Sorted(maps.Keys(m))
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
		case strings.HasPrefix(n, SystemPrefix):
			v.addf(k, "network %q is reserved: %s", n, reservedNetworkRule)
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
	for _, name := range slices.Sorted(maps.Keys(raw)) {
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

// duration parses an optional duration and checks its bounds; zero when
// absent or invalid.
func (v *validator) duration(key string, raw *string, lo, hi time.Duration) core.Duration {
	if raw == nil {
		return 0
	}
	d, err := time.ParseDuration(*raw)
	if err != nil {
		v.addf(key, "invalid duration %q: want a Go duration from %s to %s, such as \"30s\" or \"2m\"", *raw, FormatDuration(lo), FormatDuration(hi))
		return 0
	}
	if d < lo || d > hi {
		v.addf(key, "%s is out of range: want from %s to %s", *raw, FormatDuration(lo), FormatDuration(hi))
		return 0
	}
	return core.Duration(d)
}

// FormatDuration writes d as the manifest does and as its messages quote
// bounds: whole minutes as "5m" rather than "5m0s", whole hours as "1h"
// rather than "1h0m0s"; anything else as time.Duration.String.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m") // "1h", not "1h0m"
	}
	return s
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

// aliasClashes refuses an alias that is another service's name or
// another service's alias: on the app network it would reach two
// services.
func (v *validator) aliasClashes(services []core.ServiceSpec) {
	owner := map[string]string{}
	for _, s := range services {
		owner[s.Name] = s.Name
	}
	for _, s := range services {
		for i, a := range s.Aliases {
			if o, ok := owner[a]; ok && o != s.Name {
				v.addf(fmt.Sprintf("services.%s.aliases[%d]", s.Name, i), "alias %q is already the name or an alias of service %s: other services could not tell them apart on the app network; choose another", a, o)
				continue
			}
			owner[a] = s.Name
		}
	}
}
