package manifest

import (
	"maps"
	"slices"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/depgraph"
)

// dependencies checks depends_on across the app: every name is a service of
// the app, and there is no cycle (reported once, on the first service of the
// cycle in name order, with the cycle spelled out).
func (v *validator) dependencies(services []core.ServiceSpec) {
	byName := map[string]*core.ServiceSpec{}
	for i := range services {
		byName[services[i].Name] = &services[i]
	}
	for i := range services {
		s := &services[i]
		kept := s.DependsOn[:0:0]
		for _, d := range s.DependsOn {
			if _, ok := byName[d]; !ok {
				names := slices.DeleteFunc(slices.Sorted(maps.Keys(byName)), func(n string) bool { return n == s.Name })
				if len(names) == 0 {
					v.addf(v.dependsKey(s.Name, d), "unknown service %q: the app has no other service", d)
				} else {
					v.addf(v.dependsKey(s.Name, d), "unknown service %q: want one of the app's services (%s)", d, strings.Join(names, ", "))
				}
				continue
			}
			kept = append(kept, d)
		}
		s.DependsOn = kept
		if len(kept) == 0 {
			s.DependsOn = nil
		}
	}
	if cycle := depgraph.DependencyCycle(services); cycle != nil {
		v.addf(v.dependsKey(cycle[0], cycle[1]), "dependency cycle: %s; remove one of these depends_on entries", strings.Join(cycle, " -> "))
	}
}

// dependsKey returns the canonical key of svc's depends_on entry naming dep.
func (v *validator) dependsKey(svc, dep string) string {
	if k, ok := v.depKeys[svc+"\x00"+dep]; ok {
		return k
	}
	return "services." + svc + ".depends_on"
}
