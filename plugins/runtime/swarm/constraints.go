package swarm

import (
	"fmt"
	"strings"

	"github.com/moby/moby/api/types/swarm"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Placement constraints. A service's placement (manifest placement,
// compose deploy.placement.constraints) reaches the runtime as the
// instance's core.LabelPlacement label, one constraint a line in Swarm's
// syntax ("node.role==worker"). Every instance's service carries them as
// its own placement constraints, and the runtime's own choices (spread,
// the node of a single-writer service) only pick nodes that satisfy them,
// so a pin never contradicts them.

// placementOf returns c's placement constraints (none: nil).
func placementOf(c core.ContainerSpec) []string {
	v := c.Labels[core.LabelPlacement]
	if v == "" {
		return nil
	}
	return strings.Split(v, "\n")
}

// nodeAttribute returns the value of a constraint's attribute on n, and
// whether the attribute is known.
func nodeAttribute(n swarm.Node, attr string) (string, bool) {
	switch {
	case attr == "node.id":
		return n.ID, true
	case attr == "node.hostname":
		return n.Description.Hostname, true
	case attr == "node.role":
		return string(n.Spec.Role), true
	case attr == "node.platform.os":
		return n.Description.Platform.OS, true
	case attr == "node.platform.arch":
		return n.Description.Platform.Architecture, true
	case strings.HasPrefix(attr, "node.labels."):
		return n.Spec.Labels[strings.TrimPrefix(attr, "node.labels.")], true
	case strings.HasPrefix(attr, "engine.labels."):
		return n.Description.Engine.Labels[strings.TrimPrefix(attr, "engine.labels.")], true
	}
	return "", false
}

// satisfies reports whether n satisfies every constraint (as Swarm
// matches them: values compared without regard to case; an unknown
// attribute or form is never satisfied).
func satisfies(n swarm.Node, cons []string) bool {
	for _, c := range cons {
		op := "=="
		if strings.Contains(c, "!=") {
			op = "!="
		}
		attr, want, ok := strings.Cut(c, op)
		if !ok {
			return false
		}
		got, known := nodeAttribute(n, strings.TrimSpace(attr))
		if !known || strings.EqualFold(got, strings.TrimSpace(want)) != (op == "==") {
			return false
		}
	}
	return true
}

// satisfying returns the nodes that satisfy cons (all of them when cons
// is empty).
func satisfying(nodes []swarm.Node, cons []string) []swarm.Node {
	if len(cons) == 0 {
		return nodes
	}
	var out []swarm.Node
	for _, n := range nodes {
		if satisfies(n, cons) {
			out = append(out, n)
		}
	}
	return out
}

// withPlacement adds c's placement constraints to spec's.
func withPlacement(spec *swarm.ServiceSpec, c core.ContainerSpec) {
	cons := placementOf(c)
	if len(cons) == 0 {
		return
	}
	if spec.TaskTemplate.Placement == nil {
		spec.TaskTemplate.Placement = &swarm.Placement{}
	}
	spec.TaskTemplate.Placement.Constraints = append(spec.TaskTemplate.Placement.Constraints, cons...)
}

// unplaceable is the error for a service no node of the swarm satisfies.
func unplaceable(c core.ContainerSpec) error {
	return fmt.Errorf("%w: no ready node of the swarm satisfies the placement constraints %s (`docker node ls`, `docker node inspect`): change placement, or label a node (docker node update --label-add NAME=VALUE NODE)",
		core.ErrUnavailable, strings.Join(placementOf(c), ", "))
}
