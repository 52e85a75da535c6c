package steps

import (
	"slices"
	"sort"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/depgraph"
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
func SortedServiceNames(names []string) []string {
	return slices.Sorted(slices.Values(names))
}

// activeServiceNames returns ACTIVE's services in dependency order (R20:
// every service after those its spec depends on, ties by name).
func ActiveServiceNames(a core.Active) []string {
	specs := make([]core.ServiceSpec, 0, len(a.Services))
	for n, as := range a.Services {
		s := core.ServiceSpec{Name: n}
		if as != nil {
			s.DependsOn = as.Spec.DependsOn
		}
		specs = append(specs, s)
	}
	return depgraph.DependencyOrder(specs)
}

// activeServiceNamesReverse is activeServiceNames reversed: stop and
// remove take dependents down before what they depend on (R20).
func ActiveServiceNamesReverse(a core.Active) []string {
	names := ActiveServiceNames(a)
	for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
		names[i], names[j] = names[j], names[i]
	}
	return names
}

// inOrder returns the names of subset in the order of order (names absent
// from order last, by name).
func InOrder(order, subset []string) []string {
	want := map[string]bool{}
	for _, n := range subset {
		want[n] = true
	}
	var out []string
	for _, n := range order {
		if want[n] {
			out = append(out, n)
			delete(want, n)
		}
	}
	rest := make([]string, 0, len(want))
	for n := range want {
		rest = append(rest, n)
	}
	sort.Strings(rest)
	return append(out, rest...)
}
