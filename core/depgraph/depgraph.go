// Package depgraph orders an app's services by depends_on (SPEC R20). It
// lives beside core, not in it, so the plugin contract stays small.
package depgraph

import (
	"sort"

	"github.com/gordon-deploy/docker-gordon/core"
)

// DependencyOrder returns the service names of services in deploy order:
// every service after the services it depends on (DependsOn), ties by
// name (SPEC R20 as extended by depends_on). Unknown names in DependsOn are
// ignored; services in a cycle (refused by the manifest) come last, by name.
func DependencyOrder(services []core.ServiceSpec) []string {
	deps := map[string][]string{}
	var names []string
	for _, s := range services {
		names = append(names, s.Name)
		deps[s.Name] = s.DependsOn
	}
	sort.Strings(names)
	done := map[string]bool{}
	var out []string
	for len(out) < len(names) {
		progress := false
		for _, n := range names {
			if done[n] {
				continue
			}
			ready := true
			for _, d := range deps[n] {
				if _, known := deps[d]; known && !done[d] {
					ready = false
					break
				}
			}
			if ready {
				done[n] = true
				out = append(out, n)
				progress = true
				break // restart from the first name: ties by name
			}
		}
		if !progress {
			for _, n := range names {
				if !done[n] {
					done[n] = true
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// DependencyCycle returns one depends_on cycle as the names along it, the
// first repeated at the end ("a", "b", "a"), starting from the smallest
// name on a cycle; nil when there is none.
func DependencyCycle(services []core.ServiceSpec) []string {
	deps := map[string][]string{}
	var names []string
	for _, s := range services {
		names = append(names, s.Name)
		deps[s.Name] = s.DependsOn
	}
	sort.Strings(names)
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, d := range deps[n] {
			if _, known := deps[d]; !known {
				continue
			}
			switch color[d] {
			case grey:
				for i, s := range stack {
					if s == d {
						found = append(append([]string{}, stack[i:]...), d)
						return true
					}
				}
			case white:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	for _, n := range names {
		if color[n] == white && visit(n) {
			// Rotate so the cycle starts at its smallest name.
			ring := found[:len(found)-1]
			min := 0
			for i := range ring {
				if ring[i] < ring[min] {
					min = i
				}
			}
			out := append(append([]string{}, ring[min:]...), ring[:min]...)
			return append(out, out[0])
		}
	}
	return nil
}
