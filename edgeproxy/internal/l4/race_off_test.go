//go:build !race

package l4

const raceEnabled = false
