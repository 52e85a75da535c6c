package core

import "time"

// Monitor bounds (SPEC R76).
const (
	MinMonitorWindow = 10 * time.Second
	MaxMonitorWindow = 30 * time.Minute
)

// Monitor is a service's post-switch watch (SPEC R76, manifest
// [services.X.monitor]): for Window after the switch the deploy keeps the
// old generation stopped (not removed) as a standby and reads the edge's
// cumulative request and error counts of the new generation's backends.
// When at least MinRequests requests were answered and the share of 5xx
// answers (proxy errors included) exceeds MaxErrorRate, the deploy rolls
// the service back to the standby (an automatic rollback); at the window's
// end the standby is retired. Only a service with an HTTP interface can be
// monitored.
type Monitor struct {
	// Window is how long the new generation is watched (10s..30m).
	Window Duration `json:"window"`
	// MaxErrorRate is the highest tolerated error share, 0..1 (0 means
	// any error counts as a breach once MinRequests are seen).
	MaxErrorRate float64 `json:"max_error_rate"`
	// MinRequests is how many requests the window must see before a rate
	// can trigger a rollback (>= 1).
	MinRequests int64 `json:"min_requests"`
}

// Breached reports whether requests and errors (deltas since the switch)
// breach m: at least MinRequests requests and errors/requests >
// MaxErrorRate.
func (m *Monitor) Breached(requests, errors int64) bool {
	if m == nil || requests <= 0 || requests < m.MinRequests {
		return false
	}
	return float64(errors)/float64(requests) > m.MaxErrorRate
}
