package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/durable"
)

// Placement of single-writer services. A named volume
// lives on the node whose engine created it, and a bind mount names a path
// on one node, so an instance with either must always run on the same
// node: its service gets the constraint node.id==<ID>. The node is, in
// order:
//   - the one the service names (ContainerSpec.Node: manifest node,
//     compose x-gordon.node), by hostname or ID; it must exist (else
//     core.ErrInvalid) and be ready and active (else core.ErrUnavailable);
//   - the one recorded for (app, service) at its first placement, in
//     <StateDir>/swarm/placement.json, else as the LabelNode label of a
//     service of that (app, service) (another manager's CLI adopts it);
//   - at the first placement, the ready, active node with the fewest
//     running gordon-managed tasks (ties: the lowest hostname).
//
// The node chosen or named is recorded in the file (under a flock, written
// atomically) and as the service's LabelNode label.

// LabelNode is the service label naming the node ID a single-writer
// instance is pinned to.
const LabelNode = "dev.gordon.node"

// placementVersion is placement.json's schema version.
const placementVersion = 1

// placementFile is <StateDir>/swarm/placement.json.
type placementFile struct {
	Version int `json:"version"`
	// Services maps "<app>/<service>" to its node.
	Services map[string]placedNode `json:"services"`
}

// placedNode is one (app, service)'s node.
type placedNode struct {
	NodeID   string    `json:"node_id"`
	Hostname string    `json:"hostname"`
	At       time.Time `json:"at"`
}

// singleWriter reports whether c must stay on one node: it names a node,
// or mounts a named volume or a host path (a file secret's copy is no
// host path: it becomes a Docker secret; nor is a project file's: a
// Docker config).
func singleWriter(c core.ContainerSpec) bool {
	if c.Node != "" {
		return true
	}
	for _, m := range c.Mounts {
		if m.Type == core.MountVolume || (m.Type == core.MountBind && m.Secret == "" && m.Config == "") {
			return true
		}
	}
	return false
}

// pin constrains spec's tasks to the node with ID nodeID and labels the
// service with it.
func pin(spec *swarm.ServiceSpec, nodeID string) {
	if spec.TaskTemplate.Placement == nil {
		spec.TaskTemplate.Placement = &swarm.Placement{}
	}
	spec.TaskTemplate.Placement.Constraints = append(spec.TaskTemplate.Placement.Constraints, "node.id=="+nodeID)
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	spec.Labels[LabelNode] = nodeID
}

// hostname is a node's hostname, else its ID.
func hostname(n swarm.Node) string {
	if n.Description.Hostname != "" {
		return n.Description.Hostname
	}
	return n.ID
}

// usable says why node n cannot take a task now ("" when it can): it must
// be ready and active.
func usable(n swarm.Node) string {
	switch {
	case n.Status.State != swarm.NodeStateReady:
		return fmt.Sprintf("node %s is %s, not ready: bring it back (start its dockerd; `docker node ls` shows it Ready)", hostname(n), n.Status.State)
	case n.Spec.Availability != swarm.NodeAvailabilityActive:
		return fmt.Sprintf("node %s is %s, not active: `docker node update --availability active %s`", hostname(n), n.Spec.Availability, hostname(n))
	}
	return ""
}

// namedNode finds the node name names (an ID or a hostname). Absent or
// ambiguous wraps core.ErrInvalid; not ready or not active wraps
// core.ErrUnavailable.
func namedNode(nodes []swarm.Node, name string) (swarm.Node, error) {
	var found []swarm.Node
	var names []string
	for _, n := range nodes {
		names = append(names, hostname(n))
		if n.ID == name || n.Description.Hostname == name {
			found = append(found, n)
		}
	}
	sort.Strings(names)
	switch {
	case len(found) == 0:
		return swarm.Node{}, fmt.Errorf("%w: node %q is not in the swarm (its nodes: %s): set node to one of them (`docker node ls`), or remove node to let the runtime choose",
			core.ErrInvalid, name, strings.Join(names, ", "))
	case len(found) > 1:
		return swarm.Node{}, fmt.Errorf("%w: several nodes have the hostname %q: set node to the node's ID (`docker node ls`)", core.ErrInvalid, name)
	}
	if why := usable(found[0]); why != "" {
		return swarm.Node{}, fmt.Errorf("%w: the service is pinned to %s", core.ErrUnavailable, why)
	}
	return found[0], nil
}

// chooseNode is a first placement: the ready, active node with the fewest
// running gordon-managed tasks (running counts them per node ID), ties to
// the lowest hostname. None usable wraps core.ErrUnavailable.
func chooseNode(nodes []swarm.Node, running map[string]int) (swarm.Node, error) {
	var ok []swarm.Node
	for _, n := range nodes {
		if usable(n) == "" {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		return swarm.Node{}, fmt.Errorf("%w: no node of the swarm is ready and active to place a single-writer service on (`docker node ls`)", core.ErrUnavailable)
	}
	sort.Slice(ok, func(i, j int) bool {
		if ci, cj := running[ok[i].ID], running[ok[j].ID]; ci != cj {
			return ci < cj
		}
		return hostname(ok[i]) < hostname(ok[j])
	})
	return ok[0], nil
}

// place returns the node ID single-writer instance c is pinned to (see
// the rules above) and records it.
func (r *Runtime) place(ctx context.Context, c core.ContainerSpec, what string) (string, error) {
	res, err := r.cli.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return "", r.classify(err, what)
	}
	nodes := res.Items
	app, svc := c.Labels[core.LabelApp], c.Labels[core.LabelService]
	key := app + "/" + svc
	unlock, err := r.lockPlacements()
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	if c.Node != "" {
		n, err := namedNode(nodes, c.Node)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		if !satisfies(n, placementOf(c)) {
			return "", fmt.Errorf("%s: %w: node %s does not satisfy the placement constraints %s: change node or placement", what, core.ErrInvalid, hostname(n), strings.Join(placementOf(c), ", "))
		}
		return n.ID, r.record(key, n, what)
	}
	id, err := r.recorded(ctx, key, app, svc, what)
	if err != nil {
		return "", err
	}
	if id != "" {
		for _, n := range nodes {
			if n.ID == id && !satisfies(n, placementOf(c)) {
				return "", fmt.Errorf("%s: %w: %s's volumes live on node %s, which the placement constraints %s exclude: change placement, or pin the service to another node with node = \"<hostname>\" (its volumes start empty there)",
					what, core.ErrInvalid, key, hostname(n), strings.Join(placementOf(c), ", "))
			}
			if n.ID == id {
				return id, r.record(key, n, what)
			}
		}
		return "", fmt.Errorf("%s: %w: %s's volumes live on node %s, which has left the swarm: bring that node back, or pin the service to another node with node = \"<hostname>\" (its volumes start empty there)",
			what, core.ErrUnavailable, key, id)
	}
	running, err := r.runningPerNode(ctx, what)
	if err != nil {
		return "", err
	}
	fit := satisfying(nodes, placementOf(c))
	if len(fit) == 0 {
		return "", fmt.Errorf("%s: %w", what, unplaceable(c))
	}
	n, err := chooseNode(fit, running)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return n.ID, r.record(key, n, what)
}

// recorded is the node ID recorded for key: the file's, else the
// LabelNode label of a service of (app, service) ("" when none).
func (r *Runtime) recorded(ctx context.Context, key, app, svc, what string) (string, error) {
	f, err := r.readPlacements()
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if p, ok := f.Services[key]; ok && p.NodeID != "" {
		return p.NodeID, nil
	}
	res, err := r.cli.ServiceList(ctx, client.ServiceListOptions{Filters: make(client.Filters).
		Add("label", core.LabelApp+"="+app).Add("label", core.LabelService+"="+svc).Add("label", LabelNode)})
	if err != nil {
		return "", r.classify(err, what)
	}
	for _, s := range res.Items {
		if id := s.Spec.Labels[LabelNode]; id != "" {
			return id, nil
		}
	}
	return "", nil
}

// runningPerNode counts the tasks of gordon-managed services Swarm wants
// running, per node ID.
func (r *Runtime) runningPerNode(ctx context.Context, what string) (map[string]int, error) {
	svcs, err := r.cli.ServiceList(ctx, client.ServiceListOptions{Filters: make(client.Filters).Add("label", core.LabelManaged+"=true")})
	if err != nil {
		return nil, r.classify(err, what)
	}
	managed := map[string]bool{}
	for _, s := range svcs.Items {
		managed[s.ID] = true
	}
	tasks, err := r.cli.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("desired-state", "running")})
	if err != nil {
		return nil, r.classify(err, what)
	}
	out := map[string]int{}
	for _, t := range tasks.Items {
		if managed[t.ServiceID] && t.NodeID != "" && t.DesiredState == swarm.TaskStateRunning {
			out[t.NodeID]++
		}
	}
	return out, nil
}

// placementPath is <StateDir>/swarm/placement.json ("" without a state
// directory: placements are then recorded only as service labels).
func (r *Runtime) placementPath() string {
	if r.opts.StateDir == "" {
		return ""
	}
	return filepath.Join(r.opts.StateDir, "swarm", "placement.json")
}

// lockPlacements takes the flock <StateDir>/swarm/placement.lock, so two
// deploys sharing a state directory place one at a time.
func (r *Runtime) lockPlacements() (func(), error) {
	p := r.placementPath()
	if p == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("placement record: %w", err)
	}
	fl := flock.New(strings.TrimSuffix(p, ".json") + ".lock")
	if err := fl.Lock(); err != nil {
		return nil, fmt.Errorf("placement record: lock: %w", err)
	}
	return func() { _ = fl.Unlock() }, nil
}

// readPlacements reads the record (empty when absent or without a state
// directory); an unreadable one is an error, not an empty record, so a
// volume's node is never forgotten silently.
func (r *Runtime) readPlacements() (placementFile, error) {
	f := placementFile{Version: placementVersion, Services: map[string]placedNode{}}
	p := r.placementPath()
	if p == "" {
		return f, nil
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("placement record: %w", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("placement record %s: %w: %w (it says which node each volume-backed service's volumes live on: repair or remove it)", p, core.ErrInvalid, err)
	}
	if f.Services == nil {
		f.Services = map[string]placedNode{}
	}
	return f, nil
}

// record writes key's node into the record (atomically, under the
// caller's flock) unless it is already there.
func (r *Runtime) record(key string, n swarm.Node, what string) error {
	p := r.placementPath()
	if p == "" {
		return nil
	}
	f, err := r.readPlacements()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if cur, ok := f.Services[key]; ok && cur.NodeID == n.ID && cur.Hostname == hostname(n) {
		return nil
	}
	f.Version = placementVersion
	f.Services[key] = placedNode{NodeID: n.ID, Hostname: hostname(n), At: time.Now().UTC()}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: placement record: %w", what, err)
	}
	if err := durable.WriteFile(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("%s: placement record: %w", what, err)
	}
	return nil
}
