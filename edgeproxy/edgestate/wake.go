package edgestate

import (
	"strings"
	"time"
)

// ServiceActivity is when requests or connections last reached one
// service's instances through the edge (SPEC R81), as GET /activity on
// the admin address reports it: the latest of a counted request or
// connection, a request or connection open on an instance, and the moment
// the edge began routing the current instances.
type ServiceActivity struct {
	App     string    `json:"app"`
	Service string    `json:"service"`
	Last    time.Time `json:"last"`
}

// WakeRequest is one sleeping service a request or a connection asked the
// edge to wake (SPEC R81), as GET /wakes on the admin address reports it.
type WakeRequest struct {
	App     string    `json:"app"`
	Service string    `json:"service"`
	At      time.Time `json:"at"`
}

// DefaultWakeTimeout is how long a request or a connection is held for a
// wake when its route gives no bound.
const DefaultWakeTimeout = 60 * time.Second

// WakeTimeout is a sleeping route's wake bound of ms milliseconds
// (DefaultWakeTimeout when 0 or less).
func WakeTimeout(ms int64) time.Duration {
	if ms <= 0 {
		return DefaultWakeTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// WakeIgnored reports whether a request for path matches one of ignore:
// an exact path, or a prefix ending in "*".
func WakeIgnored(ignore []string, path string) bool {
	for _, p := range ignore {
		if pre, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(path, pre) || p == path {
			return true
		}
	}
	return false
}
