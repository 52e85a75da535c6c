package swarm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Isolation between apps on a swarm (docs/security.md). Each app's
// instances join only their app's overlay (and the shared networks the
// manifest names), never a network shared with other apps or with the
// control plane. The edge service (Options.EdgeService) joins each app's
// overlay: joinEdge adds the network to the edge service (Swarm replaces
// each node's edge task once, in turn) and waits until every edge task
// runs attached to it. The process itself, when it runs in a container
// of this engine on the edge's control overlay (the runner, the reconcile
// loop), connects its own container to the app's overlay (joinSelf), so
// its readiness probes reach the instances there.

// edgeJoinTimeout bounds joinEdge's wait for the edge tasks.
var edgeJoinTimeout = 3 * time.Minute

// joinEdge makes the edge service a member of the overlay netID (named
// name), once per process: a service update when it is not one yet, then
// a wait until every edge task that should run runs attached to it. No
// edge service configured (Options.EdgeService "") or none running is
// nothing to do. A rollout that does not finish in edgeJoinTimeout wraps
// core.ErrUnavailable.
func (r *Runtime) joinEdge(ctx context.Context, netID, name, what string) error {
	if r.opts.EdgeService == "" || netID == "" {
		return nil
	}
	r.mu.Lock()
	done := r.edgeJoined[netID]
	r.mu.Unlock()
	if done {
		return nil
	}
	res, err := r.cli.ServiceInspect(ctx, r.opts.EdgeService, client.ServiceInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return r.classify(err, what+": inspect the edge service")
	}
	svc := res.Service
	nodes, err := r.edgeNodes(ctx, svc.ID, what)
	if err != nil {
		return err
	}
	if !attachedTo(svc.Spec.TaskTemplate.Networks, netID, name) {
		spec := svc.Spec
		spec.TaskTemplate.Networks = append(append([]swarm.NetworkAttachmentConfig(nil), spec.TaskTemplate.Networks...), swarm.NetworkAttachmentConfig{Target: netID})
		if _, err := r.cli.ServiceUpdate(ctx, svc.ID, client.ServiceUpdateOptions{Version: svc.Version, Spec: spec}); err != nil {
			return r.classify(err, what+": join the edge service "+r.opts.EdgeService+" to the app's network "+name)
		}
	}
	if err := r.awaitEdge(ctx, svc.ID, netID, name, what, nodes, true); err != nil {
		return err
	}
	r.mu.Lock()
	if r.edgeJoined == nil {
		r.edgeJoined = map[string]bool{}
	}
	r.edgeJoined[netID] = true
	r.mu.Unlock()
	return nil
}

// attachedTo reports whether nets has netID (or the name).
func attachedTo(nets []swarm.NetworkAttachmentConfig, netID, name string) bool {
	for _, n := range nets {
		if n.Target == netID || n.Target == name {
			return true
		}
	}
	return false
}

// edgeNodes counts the nodes with an edge task that should run.
func (r *Runtime) edgeNodes(ctx context.Context, svcID, what string) (int, error) {
	tl, err := r.cli.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", svcID).Add("desired-state", "running")})
	if err != nil {
		return 0, r.classify(err, what+": list the edge's tasks")
	}
	nodes := map[string]bool{}
	for _, t := range tl.Items {
		if t.ServiceID == svcID && t.DesiredState == swarm.TaskStateRunning {
			nodes[t.NodeID] = true
		}
	}
	return len(nodes), nil
}

// awaitEdge waits until every edge task that should run is running and
// attached to netID (join; off it: !join), on at least nodes nodes (as
// many as ran one before the update): while Swarm replaces a node's task,
// that node has a moment with no task that should run, which must not
// pass for done.
func (r *Runtime) awaitEdge(ctx context.Context, svcID, netID, name, what string, nodes int, join bool) error {
	deadline := time.Now().Add(edgeJoinTimeout)
	for {
		tl, err := r.cli.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", svcID).Add("desired-state", "running")})
		if err != nil {
			return r.classify(err, what+": list the edge's tasks")
		}
		on, off := map[string]bool{}, 0
		for _, t := range tl.Items {
			if t.ServiceID != svcID || t.DesiredState != swarm.TaskStateRunning {
				continue
			}
			if t.Status.State == swarm.TaskStateRunning && taskOn(t, netID) == join {
				on[t.NodeID] = true
			} else {
				off++
			}
		}
		if off == 0 && len(on) >= max(nodes, 1) {
			return nil
		}
		if time.Now().After(deadline) {
			verb := "join"
			if !join {
				verb = "leave"
			}
			return fmt.Errorf("%s: %w: the edge service %s did not %s the app's network %s in %v (%d node(s) of %d done): see docker service ps %s",
				what, core.ErrUnavailable, r.opts.EdgeService, verb, name, edgeJoinTimeout, len(on), nodes, r.opts.EdgeService)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func taskOn(t swarm.Task, netID string) bool {
	for _, a := range t.NetworksAttachments {
		if a.Network.ID == netID {
			return true
		}
	}
	return false
}

// joinSelf connects this process's own container to the overlay netID,
// once per process, when the process runs in a container of the manager's
// engine attached to Options.EdgeNetwork (the runner, the reconcile
// loop): its probes then reach the app's instances. Anywhere else (the
// CLI on a host, a test) it does nothing.
func (r *Runtime) joinSelf(ctx context.Context, netID, what string) error {
	if r.opts.EdgeNetwork == "" || netID == "" {
		return nil
	}
	r.mu.Lock()
	done := r.selfJoined[netID]
	r.mu.Unlock()
	if done {
		return nil
	}
	self, err := os.Hostname()
	if err != nil {
		return nil
	}
	ins, err := r.cli.ContainerInspect(ctx, self, client.ContainerInspectOptions{})
	if err != nil || ins.Container.NetworkSettings == nil {
		return nil // not a container of this engine
	}
	nets := ins.Container.NetworkSettings.Networks
	if _, onEdge := nets[r.opts.EdgeNetwork]; !onEdge {
		return nil
	}
	joined := false
	for _, ep := range nets {
		if ep != nil && ep.NetworkID == netID {
			joined = true
		}
	}
	if !joined {
		_, err := r.cli.NetworkConnect(ctx, netID, client.NetworkConnectOptions{Container: ins.Container.ID})
		if err != nil && !strings.Contains(err.Error(), "already exists") && !errors.Is(err, context.Canceled) {
			return r.classify(err, what+": connect this container to the app's network")
		}
	}
	r.mu.Lock()
	if r.selfJoined == nil {
		r.selfJoined = map[string]bool{}
	}
	r.selfJoined[netID] = true
	r.mu.Unlock()
	return nil
}

// leaveApp takes the edge service off the app overlay netID (named name)
// and disconnects this engine's gordon containers from it (the runner,
// the reconcile loop: joinSelf), so the app's network can be removed once
// its instances are gone. The edge's tasks are replaced once, in turn.
func (r *Runtime) leaveApp(ctx context.Context, netID, name, what string) error {
	if r.opts.EdgeService != "" {
		res, err := r.cli.ServiceInspect(ctx, r.opts.EdgeService, client.ServiceInspectOptions{})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return r.classify(err, what+": inspect the edge service")
		}
		if err == nil && attachedTo(res.Service.Spec.TaskTemplate.Networks, netID, name) {
			svc := res.Service
			nodes, err := r.edgeNodes(ctx, svc.ID, what)
			if err != nil {
				return err
			}
			spec := svc.Spec
			spec.TaskTemplate.Networks = nil
			for _, n := range svc.Spec.TaskTemplate.Networks {
				if n.Target != netID && n.Target != name {
					spec.TaskTemplate.Networks = append(spec.TaskTemplate.Networks, n)
				}
			}
			if _, err := r.cli.ServiceUpdate(ctx, svc.ID, client.ServiceUpdateOptions{Version: svc.Version, Spec: spec}); err != nil {
				return r.classify(err, what+": take the edge service off the app's network")
			}
			if err := r.awaitEdge(ctx, svc.ID, netID, name, what, nodes, false); err != nil {
				return err
			}
		}
	}
	r.mu.Lock()
	delete(r.edgeJoined, netID)
	delete(r.selfJoined, netID)
	r.mu.Unlock()
	ins, err := r.cli.NetworkInspect(ctx, netID, client.NetworkInspectOptions{})
	if err != nil {
		return nil // gone: nothing attached
	}
	for id := range ins.Network.Containers {
		c, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil || c.Container.Config == nil || c.Container.Config.Labels[core.LabelManaged] != "true" || c.Container.Config.Labels[core.LabelApp] != "" {
			continue // not a gordon system container of this engine
		}
		_, _ = r.cli.NetworkDisconnect(ctx, netID, client.NetworkDisconnectOptions{Container: id, Force: true})
	}
	return nil
}
