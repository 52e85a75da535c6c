package swarm

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// LabelSpread marks an instance placed by spread: its service's
// constraint node.id==<LabelSpread's value> holds only until its first
// task runs (StartContainer then drops it), so Swarm may reschedule the
// instance anywhere when that node is lost.
const LabelSpread = "dev.gordon.spread"

// Swarm spreads the tasks of one service over the nodes, but an instance
// is a service of its own, so the instances of one generation could all
// land on one node, and that node's loss would take all of them. A
// stateless instance is therefore created on the node that holds the
// fewest instances of its generation (same app, service and op labels),
// then the least loaded: a constraint that StartContainer removes once the
// task runs. Swarm does not restart a task for a constraint change its
// node still satisfies, so removing it moves nothing.

// spreadNode chooses the node for stateless instance c: among the ready,
// active nodes, the fewest instances of c's generation (siblings, per
// node ID), then the fewest running gordon tasks (load), then the lowest
// hostname. "" when no node is usable (Swarm then places it itself).
func spreadNode(nodes []swarm.Node, siblings, load map[string]int) string {
	var ok []swarm.Node
	for _, n := range nodes {
		if usable(n) == "" {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		return ""
	}
	slices.SortFunc(ok, func(a, b swarm.Node) int {
		if d := siblings[a.ID] - siblings[b.ID]; d != 0 {
			return d
		}
		if d := load[a.ID] - load[b.ID]; d != 0 {
			return d
		}
		return strings.Compare(hostname(a), hostname(b))
	})
	return ok[0].ID
}

// spread sets the spread constraint and label on spec (stateless c). The
// caller holds r.spreadMu from here until the service exists, so
// concurrent creates of one generation see each other.
func (r *Runtime) spread(ctx context.Context, c core.ContainerSpec, spec *swarm.ServiceSpec, what string) error {
	app := c.Labels[core.LabelApp]
	if app == "" {
		return nil
	}
	nl, err := r.cli.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return r.classify(err, what)
	}
	// Siblings share the app, and the service and op labels c has.
	f := make(client.Filters).Add("label", core.LabelApp+"="+app)
	for _, k := range []string{core.LabelService, core.LabelOp} {
		if v := c.Labels[k]; v != "" {
			f.Add("label", k+"="+v)
		}
	}
	sl, err := r.cli.ServiceList(ctx, client.ServiceListOptions{Filters: f})
	if err != nil {
		return r.classify(err, what)
	}
	siblings := map[string]int{}
	for _, s := range sl.Items {
		if n := s.Spec.Labels[LabelSpread]; n != "" {
			siblings[n]++
		} else if n := s.Spec.Labels[LabelNode]; n != "" {
			siblings[n]++
		}
	}
	load, err := r.placedPerNode(ctx, what)
	if err != nil {
		return err
	}
	fit := satisfying(nl.Items, placementOf(c))
	if len(fit) == 0 {
		return fmt.Errorf("%s: %w", what, unplaceable(c))
	}
	node := spreadNode(fit, siblings, load)
	if node == "" {
		return nil
	}
	pin(spec, node)
	delete(spec.Labels, LabelNode)
	spec.Labels[LabelSpread] = node
	return nil
}

// placedPerNode counts, per node ID, the gordon-managed instances that run
// or are about to: those placed by a label (spread or pinned) whose
// service wants a replica or was never updated since its creation
// (created, not started yet: a generation's instances are all created
// before the first starts), and the running tasks of the others.
func (r *Runtime) placedPerNode(ctx context.Context, what string) (map[string]int, error) {
	svcs, err := r.cli.ServiceList(ctx, client.ServiceListOptions{Filters: make(client.Filters).Add("label", core.LabelManaged+"=true")})
	if err != nil {
		return nil, r.classify(err, what)
	}
	out := map[string]int{}
	unplaced := map[string]bool{}
	for _, s := range svcs.Items {
		node := s.Spec.Labels[LabelSpread]
		if node == "" {
			node = s.Spec.Labels[LabelNode]
		}
		if node == "" {
			unplaced[s.ID] = true
			continue
		}
		m := s.Spec.Mode.Replicated
		if (m != nil && m.Replicas != nil && *m.Replicas > 0) || s.Meta.CreatedAt.Equal(s.Meta.UpdatedAt) {
			out[node]++
		}
	}
	tasks, err := r.cli.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("desired-state", "running")})
	if err != nil {
		return nil, r.classify(err, what)
	}
	for _, t := range tasks.Items {
		if unplaced[t.ServiceID] && t.NodeID != "" && t.DesiredState == swarm.TaskStateRunning {
			out[t.NodeID]++
		}
	}
	return out, nil
}

// unspread drops the spread constraint of a running instance (see above);
// an instance without one is left alone.
func (r *Runtime) unspread(ctx context.Context, id, what string) error {
	svc, err := r.service(ctx, id, what)
	if err != nil {
		return err
	}
	node := svc.Spec.Labels[LabelSpread]
	if node == "" {
		return nil
	}
	return r.update(ctx, id, what, func(s *swarm.ServiceSpec) {
		if p := s.TaskTemplate.Placement; p != nil {
			p.Constraints = slices.DeleteFunc(p.Constraints, func(c string) bool { return c == "node.id=="+node })
		}
	})
}

// nameNode replaces st.Node (a node ID) by that node's hostname, from a
// cache of the node list refreshed on a miss; an unknown node keeps its ID.
func (r *Runtime) nameNode(ctx context.Context, st *core.ContainerState) {
	if st.Node == "" {
		return
	}
	r.mu.Lock()
	name, ok := r.nodeNames[st.Node]
	r.mu.Unlock()
	if !ok {
		nl, err := r.cli.NodeList(ctx, client.NodeListOptions{})
		if err != nil {
			return
		}
		names := make(map[string]string, len(nl.Items))
		for _, n := range nl.Items {
			names[n.ID] = hostname(n)
		}
		r.mu.Lock()
		r.nodeNames = names
		r.mu.Unlock()
		if name, ok = names[st.Node]; !ok {
			return
		}
	}
	st.Node = name
}
