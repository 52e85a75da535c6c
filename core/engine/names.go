package engine

import (
	"slices"
	"strings"
)

// ContainerName is decision 12's name, gordon-<app>-<service>-<8 of the op
// id>, with one departure: the 8 characters are the op id's LAST 8, not its
// first. Op ids are time-ordered UUIDs (R6) whose first 8 hex digits are the
// high bits of a millisecond clock and stay the same for about 65 s, so two
// deploys within a minute would clash by name; the tail is random.
func ContainerName(app, service, opID string) string {
	id := strings.TrimPrefix(opID, "op-")
	if len(id) > 8 {
		id = id[len(id)-8:]
	}
	return "gordon-" + app + "-" + service + "-" + id
}

// NetworkName is the app's private network, gordon-<app>.
func NetworkName(app string) string { return "gordon-" + app }

// VolumeName is the runtime name of a service volume, gordon-<app>-<volume>.
func VolumeName(app, volume string) string { return "gordon-" + app + "-" + volume }

// sortedServiceNames returns names in ascending order.
func sortedServiceNames(names []string) []string {
	return slices.Sorted(slices.Values(names))
}
