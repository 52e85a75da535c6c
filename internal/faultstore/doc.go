// Package faultstore is the crash-injection hook of the crash-safety
// tests: Wrap puts a counting, killing or failing core.Store around the
// journal in a -tags gordonfault build (GORDON_FAULT, GORDON_FAULT_FAIL,
// GORDON_FAULT_LOG; see fault_on.go), and returns the store unchanged in
// every other build.
package faultstore
