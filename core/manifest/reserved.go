package manifest

import "strings"

// SystemPrefix begins the name of every Docker object docker gordon
// creates: an app's network gordon-<app>, its containers
// gordon-<app>-<service>-<id>, its volumes and secrets gordon-<app>-…, and
// the system's own objects (the edge gordon-edge, its overlay and
// configs gordon-edge-…, the loop gordon-reconcile, the state mirror's
// configs gordon-state-…, the system images gordon-system/…).
const SystemPrefix = "gordon-"

// reservedAppWords are the system's words after SystemPrefix: an app
// named after one, or beginning with one and '-', would name its objects
// inside the system's (an app "edge" would take the overlay gordon-edge as
// its network, and its remove would delete it).
var reservedAppWords = []string{"edge", "reconcile", "state", "system"}

const (
	reservedAppRule     = `the names edge, reconcile, state and system, and names beginning with one of them and "-", belong to docker gordon's own containers, networks and configs (gordon-edge, gordon-reconcile…); choose another name`
	reservedServiceRule = `names beginning with "gordon-" belong to docker gordon's own containers (a service's name is its DNS name on its network: gordon-edge, gordon-reconcile…); choose another name`
	reservedNetworkRule = `networks beginning with "gordon-" are docker gordon's own (the edge's, and each app's private network); create a shared network of your own (docker network create NAME) and list that`
)

// ReservedAppName reports whether name is an app name the system keeps for
// its own objects: edge, reconcile, state, system, or one of them followed
// by '-' and anything.
func ReservedAppName(name string) bool {
	for _, w := range reservedAppWords {
		if name == w || strings.HasPrefix(name, w+"-") {
			return true
		}
	}
	return false
}
