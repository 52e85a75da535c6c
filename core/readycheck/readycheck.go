// Package readycheck computes a service's effective deploy-time readiness
// check and where it comes from (SPEC R29), in one place for the engine
// (which probes it) and the CLI (validate, deploy --dry-run and status,
// which show it).
package readycheck

import (
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// DefaultReadinessTimeout is the readiness budget when none is declared (R35).
const DefaultReadinessTimeout = 30 * time.Second

// Where a service's effective readiness comes from (Check.Source).
const (
	// FromDeclared: the manifest's readiness block (or compose's
	// x-gordon readiness) names the type, "none" included.
	FromDeclared = "declared"
	// FromHealthcheck: the manifest's (compose's) healthcheck.
	FromHealthcheck = "healthcheck"
	// FromImage: the image's HEALTHCHECK.
	FromImage = "image HEALTHCHECK"
	// FromDefault: nothing declared; the default of R29.
	FromDefault = "default"
)

// Check is a service's deploy-time readiness check with its
// origin: what the engine probes before anything is routed to a new
// container (R29), and what validate, deploy --dry-run and status show.
type Check struct {
	core.Readiness
	// Source is one of the From* values.
	Source string `json:"source"`
}

// String renders the check for people: "tcp connect :8080 (default)",
// "http GET / on :8080 (declared)", "docker health (image HEALTHCHECK)",
// "none: routed as soon as it starts (declared)", "none (no HTTP or TCP
// interface to probe)".
func (e Check) String() string {
	var what string
	switch e.Type {
	case core.ReadinessHTTP:
		what = fmt.Sprintf("http GET %s on :%d", e.Path, e.Port)
	case core.ReadinessTCP:
		what = fmt.Sprintf("tcp connect :%d", e.Port)
	case core.ReadinessDocker:
		what = "docker health must be healthy"
	case core.ReadinessLog:
		what = fmt.Sprintf("log line %q", e.Pattern)
	case core.ReadinessPlugin:
		what = "plugin " + e.Plugin
	case core.ReadinessNone, "":
		if e.Source == FromDefault {
			return "none (no HTTP or TCP interface to probe)"
		}
		what = "none: routed as soon as it starts"
	default:
		what = e.Type
	}
	return what + " (" + e.Source + ")"
}

// Deploy returns the deploy-time check of s (SPEC R29), in one
// place for the engine and the CLI. imageHealthcheck says whether s's
// image declares a HEALTHCHECK (false when unknown).
//
//   - A declared type (http, tcp, log, plugin, docker, or an explicit
//     "none", which is unchecked) is used as declared, never replaced.
//   - Else a healthcheck (the manifest's, else the image's unless the
//     manifest disables it): type docker.
//   - Else, by default: one or more HTTP interfaces, all public, no TCP,
//     no UDP, no volume, no bind: HTTP GET "/" on the public port; any
//     other service with an HTTP or TCP interface: a TCP connect on its
//     first public HTTP port, else its first TCP port, else its first
//     (internal) HTTP port; a service with neither: none.
//
// Path defaults to "/" for http, Port per R30 for a declared http, tcp or
// plugin check (0 when nothing can be probed), Timeout to 30 s (R35).
func Deploy(s *core.ServiceSpec, imageHealthcheck bool) Check {
	r := s.Readiness
	switch r.Type {
	case core.ReadinessHTTP, core.ReadinessTCP, core.ReadinessLog, core.ReadinessPlugin, core.ReadinessDocker, core.ReadinessNone:
		return Check{Readiness: withReadinessDefaults(s, r), Source: FromDeclared}
	}
	src := FromDefault
	hc := imageHealthcheck
	if imageHealthcheck {
		src = FromImage
	}
	if s.Healthcheck != nil {
		hc, src = s.Healthcheck.Enabled(), FromHealthcheck
	}
	switch {
	case hc:
		r.Type = core.ReadinessDocker
	case implicitHTTP(s):
		r.Type, src = core.ReadinessHTTP, FromDefault
	case defaultTCPPort(s) > 0:
		r.Type, src = core.ReadinessTCP, FromDefault
		if r.Port == 0 {
			r.Port = defaultTCPPort(s)
		}
	default:
		r.Type, src = core.ReadinessNone, FromDefault
	}
	return Check{Readiness: withReadinessDefaults(s, r), Source: src}
}

// Declared returns the check used to verify a running generation
// (start, boot, periodic pass): the declared check only (R29 last line).
// An empty or "none" type yields type "none". Defaults are filled as in
// Deploy.
func Declared(s *core.ServiceSpec) core.Readiness {
	r := s.Readiness
	if r.Type == "" {
		r.Type = core.ReadinessNone
	}
	return withReadinessDefaults(s, r)
}

// withReadinessDefaults fills path, port and timeout of r for s.
func withReadinessDefaults(s *core.ServiceSpec, r core.Readiness) core.Readiness {
	if r.Timeout == 0 {
		r.Timeout = core.Duration(DefaultReadinessTimeout)
	}
	switch r.Type {
	case core.ReadinessHTTP:
		if r.Path == "" {
			r.Path = "/"
		}
		if r.Port == 0 {
			r.Port = readinessPort(s)
		}
	case core.ReadinessTCP, core.ReadinessPlugin:
		if r.Port == 0 {
			r.Port = readinessPort(s)
		}
	}
	return r
}

// implicitHTTP is R29's implicit HTTP condition: a stateless web service.
func implicitHTTP(s *core.ServiceSpec) bool {
	if len(s.HTTP) == 0 || len(s.TCP) > 0 || len(s.UDP) > 0 || len(s.Volumes) > 0 || len(s.Binds) > 0 {
		return false
	}
	for _, h := range s.HTTP {
		if !h.Public() {
			return false
		}
	}
	return true
}

// defaultTCPPort is the port R29's default TCP connect probes: the first
// public HTTP port, else the first TCP port, else the first HTTP port (an
// internal one, probed from the app network, R30); 0 when s has no HTTP
// or TCP interface.
func defaultTCPPort(s *core.ServiceSpec) int {
	for _, h := range s.HTTP {
		if h.Public() {
			return h.Port
		}
	}
	if len(s.TCP) > 0 {
		return s.TCP[0].Port
	}
	if len(s.HTTP) > 0 {
		return s.HTTP[0].Port
	}
	return 0
}

// readinessPort resolves the probed container port of a declared check
// that names none (R30): the public HTTP port when the service has no TCP
// interface (the first one when there are several), else the single
// TCP-capable port (the one distinct port among all HTTP and TCP
// interfaces), else 0.
func readinessPort(s *core.ServiceSpec) int {
	if len(s.TCP) == 0 {
		for _, h := range s.HTTP {
			if h.Public() {
				return h.Port
			}
		}
	}
	ports := map[int]bool{}
	for _, h := range s.HTTP {
		ports[h.Port] = true
	}
	for _, t := range s.TCP {
		ports[t.Port] = true
	}
	if len(ports) == 1 {
		for p := range ports {
			return p
		}
	}
	return 0
}
