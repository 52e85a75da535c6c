package edgeproxy

import "time"

// SetH2StallTimeout sets h2StallTimeout for a test; the returned func
// restores it.
func SetH2StallTimeout(d time.Duration) (restore func()) {
	old := h2StallTimeout
	h2StallTimeout = d
	return func() { h2StallTimeout = old }
}

// SetTCPDialRetryHook sets tcpDialRetryHook for a test (call it before the
// edge is created: New reads it); the returned func restores it.
func SetTCPDialRetryHook(h func()) (restore func()) {
	old := tcpDialRetryHook
	tcpDialRetryHook = h
	return func() { tcpDialRetryHook = old }
}
