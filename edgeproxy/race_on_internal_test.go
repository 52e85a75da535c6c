//go:build race

package edgeproxy

const raceEnabledInternal = true
