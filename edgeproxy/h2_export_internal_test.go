package edgeproxy

import "time"

// SetH2StallTimeout sets h2StallTimeout for a test; the returned func
// restores it.
func SetH2StallTimeout(d time.Duration) (restore func()) {
	old := h2StallTimeout
	h2StallTimeout = d
	return func() { h2StallTimeout = old }
}
