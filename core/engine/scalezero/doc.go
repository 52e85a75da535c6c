// Package scalezero is scale to zero on one engine (SPEC R81): the sleep
// of idle services (their instances stopped, not removed, and their routes
// turned into waking routes) and their wake (started, probed, routed),
// each a journaled operation under the app lock.
package scalezero

import (
	"slices"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
)

// The op kinds of scale to zero (core.Operation.Kind).
const (
	OpSleep = "sleep" // idle services' instances stopped (not removed)
	OpWake  = "wake"  // sleeping services started, probed and routed again
)

// Engine is the scale-to-zero layer: it embeds the oprun layer, whose
// claim and steps it composes.
type Engine struct{ *oprun.Engine }

// Request is one sleep or wake of an app's services.
type Request struct {
	// App is the app (required).
	App string
	// Services are the services to act on (empty: every service; a wake
	// also wakes what they depend on, a sleep refuses a service an awake
	// service depends on).
	Services []string
	// Reason is journaled on each service's step ("idle 15m0s", "docker
	// gordon sleep", "first request at the edge").
	Reason string
	// OpKey is the caller's idempotency key (R6); "" generates an op id.
	OpKey string
}

// dependants returns the services of a whose spec depends on name.
func dependants(a core.Active, name string) []string {
	var out []string
	for n, s := range a.Services {
		if s != nil && slices.Contains(s.Spec.DependsOn, name) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Asleep lists the services of a that sleep, by name.
func Asleep(a core.Active) []string {
	var out []string
	for n, s := range a.Services {
		if s != nil && s.AsleepSince != nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
