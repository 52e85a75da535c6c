//go:build !race

package edgeproxy

const raceEnabledInternal = false
