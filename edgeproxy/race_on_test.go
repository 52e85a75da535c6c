//go:build race

package edgeproxy_test

// raceEnabled shortens data-heavy tests under the race detector.
const raceEnabled = true
