package swarm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// pollEvery is how often a wait re-reads the task list.
const pollEvery = 100 * time.Millisecond

// CreateContainer creates the instance c as a service with 0 replicas
// (serviceSpec says how c maps and what is refused) and returns the
// service's ID. A single-writer instance (a volume, a bind, a named node)
// is pinned to its node (placement.go); file secrets become Docker
// secrets (secrets.go). The registry credentials of
// core.WithRegistryAuth go with the service, so each node can pull the
// image. A name in use wraps core.ErrConflict.
func (r *Runtime) CreateContainer(ctx context.Context, c core.ContainerSpec) (string, error) {
	if err := r.connect(ctx); err != nil {
		return "", err
	}
	spec, err := serviceSpec(c)
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("create swarm instance %q", c.Name)
	if c.Healthcheck == nil {
		withImageHealthcheck(spec.TaskTemplate.ContainerSpec, r.imageHealthcheck(ctx, c.Image))
	}
	if err := r.checkEdgeNetwork(ctx, what); err != nil {
		return "", err
	}
	if singleWriter(c) {
		node, err := r.place(ctx, c, what)
		if err != nil {
			return "", err
		}
		pin(&spec, node)
	} else {
		r.spreadMu.Lock()
		defer r.spreadMu.Unlock()
		if err := r.spread(ctx, c, &spec, what); err != nil {
			return "", err
		}
	}
	refs, err := r.ensureSecrets(ctx, c, what)
	if err != nil {
		return "", err
	}
	spec.TaskTemplate.ContainerSpec.Secrets = refs
	crefs, err := r.ensureConfigs(ctx, c, what)
	if err != nil {
		_ = r.dropSecrets(ctx, refs, what)
		return "", err
	}
	spec.TaskTemplate.ContainerSpec.Configs = crefs
	res, err := r.cli.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: spec, EncodedRegistryAuth: core.RegistryAuthFrom(ctx)})
	if err != nil {
		_ = r.dropSecrets(ctx, refs, what)
		_ = r.dropConfigs(ctx, crefs, what)
		return "", r.classify(err, what)
	}
	return res.ID, nil
}

// StartContainer scales the instance's service to 1 and waits, at most
// Options.StartTimeout (and ctx), until its task runs. A task that fails
// or is rejected meanwhile is an error (core.ErrUnavailable) with the
// task's error message. An instance pinned to a node (LabelNode) that is
// not ready and active is refused before it is scaled, and fails the wait
// as soon as the node is seen lost (its task would stay pending): the
// error names the node and says to bring it back. On a failed wait the
// service is scaled back to 0, so the task never starts later on its own.
// Starting a running instance succeeds.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("start swarm instance %s", short(id))
	svc, err := r.service(ctx, id, what)
	if err != nil {
		return err
	}
	node := svc.Spec.Labels[LabelNode]
	if err := r.nodeUp(ctx, node, what); err != nil {
		return err
	}
	before, err := r.taskIDs(ctx, id, what)
	if err != nil {
		return err
	}
	if err := r.update(ctx, id, what, func(s *swarm.ServiceSpec) { setReplicas(s, 1) }); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	err = r.waitRunning(wctx, id, what, before, false, r.nodeLost(wctx, node, what))
	if err == nil {
		// Best effort: an instance that keeps its first-placement
		// constraint still serves; it only cannot move off that node.
		_ = r.unspread(ctx, id, what)
	}
	if err != nil {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer ucancel()
		_ = r.update(uctx, id, what, func(s *swarm.ServiceSpec) { setReplicas(s, 0) })
	}
	return err
}

// nodeUp checks that the node with ID node ("" = not pinned) is ready and
// active; else core.ErrUnavailable naming it and what to do.
func (r *Runtime) nodeUp(ctx context.Context, node, what string) error {
	if node == "" {
		return nil
	}
	res, err := r.cli.NodeInspect(ctx, node, client.NodeInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("%s: %w: the instance is pinned to node %s, where its volumes live, and that node has left the swarm: bring it back, or pin the service to another node with node = \"<hostname>\" (its volumes start empty there)",
				what, core.ErrUnavailable, node)
		}
		return r.classify(err, what)
	}
	if why := usable(res.Node); why != "" {
		return fmt.Errorf("%s: %w: the instance is pinned to node %s (%s), where its volumes live; its task cannot start elsewhere: %s",
			what, core.ErrUnavailable, hostname(res.Node), short(node), why)
	}
	return nil
}

// StopContainer scales the instance's service to 0 and waits until no task
// of it runs. Swarm stops the task with its stop signal (the spec's, else
// the image's, else SIGTERM) and kills it after the stop grace period
// recorded at creation (ContainerSpec.StopGrace): Swarm has no per-stop
// grace, so grace only bounds the wait (grace + 30 s, and ctx). Stopping
// a stopped instance succeeds.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("stop swarm instance %s", short(id))
	if err := r.update(ctx, id, what, func(s *swarm.ServiceSpec) { setReplicas(s, 0) }); err != nil {
		return err
	}
	if grace <= 0 {
		grace = DefaultGrace
	}
	ctx, cancel := context.WithTimeout(ctx, grace+30*time.Second)
	defer cancel()
	return r.wait(ctx, id, what, func(tasks []swarm.Task) (bool, error) {
		var down map[string]bool
		for _, t := range tasks {
			if !terminal(t.Status.State) && (live(t) || t.DesiredState == swarm.TaskStateRunning) {
				// A task on a node that is down reports its last state
				// until the node returns; nothing runs it meanwhile that
				// this stop could wait for (its container stops with
				// the node, or when the node's engine rejoins).
				if down == nil {
					down = r.downNodes(ctx)
				}
				if !down[t.NodeID] {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// downNodes is the set of node IDs the manager sees as not ready (empty
// when the list cannot be read: the caller then waits as before).
func (r *Runtime) downNodes(ctx context.Context) map[string]bool {
	out := map[string]bool{}
	nl, err := r.cli.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return out
	}
	for _, n := range nl.Items {
		if n.Status.State != swarm.NodeStateReady {
			out[n.ID] = true
		}
	}
	return out
}

// RestartContainer replaces the instance's task in place: a forced update
// (Swarm's default stop-first order: the old task stops with its signal
// and grace, then a new one starts) with 1 replica, waiting (at most the
// stop grace plus Options.StartTimeout) until the new task runs. A pinned instance's node
// is checked as in StartContainer.
func (r *Runtime) RestartContainer(ctx context.Context, id string, _ time.Duration) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("restart swarm instance %s", short(id))
	svc, err := r.service(ctx, id, what)
	if err != nil {
		return err
	}
	node := svc.Spec.Labels[LabelNode]
	if err := r.nodeUp(ctx, node, what); err != nil {
		return err
	}
	before, err := r.taskIDs(ctx, id, what)
	if err != nil {
		return err
	}
	err = r.update(ctx, id, what, func(s *swarm.ServiceSpec) {
		setReplicas(s, 1)
		s.TaskTemplate.ForceUpdate++
	})
	if err != nil {
		return err
	}
	limit := r.opts.StartTimeout + DefaultGrace // the old task's stop, then the start
	if cs := svc.Spec.TaskTemplate.ContainerSpec; cs != nil && cs.StopGracePeriod != nil {
		limit = r.opts.StartTimeout + *cs.StopGracePeriod
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return r.waitRunning(wctx, id, what, before, true, r.nodeLost(wctx, node, what))
}

// nodeLost is waitRunning's check for an instance pinned to node ("":
// none): nodeUp, at most once a second.
func (r *Runtime) nodeLost(ctx context.Context, node, what string) func() error {
	if node == "" {
		return nil
	}
	var checked time.Time
	return func() error {
		if time.Since(checked) < time.Second {
			return nil
		}
		checked = time.Now()
		return r.nodeUp(ctx, node, what)
	}
}

// RemoveContainer removes the instance's service; Swarm stops its task
// (signal, then grace) whether force is set or not. Volumes stay (R3).
// Then the Docker secrets and configs the service referenced go, unless
// another service references them (dropSecrets, dropConfigs).
func (r *Runtime) RemoveContainer(ctx context.Context, id string, _ bool) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("remove swarm instance %s", short(id))
	svc, err := r.service(ctx, id, what)
	if err != nil {
		return err
	}
	if _, err := r.cli.ServiceRemove(ctx, id, client.ServiceRemoveOptions{}); err != nil {
		return r.classify(err, what)
	}
	if cs := svc.Spec.TaskTemplate.ContainerSpec; cs != nil {
		return errors.Join(r.dropSecrets(ctx, cs.Secrets, what), r.dropConfigs(ctx, cs.Configs, what))
	}
	return nil
}

// InspectContainer returns the instance's state from its service and
// current task (stateOf).
func (r *Runtime) InspectContainer(ctx context.Context, id string) (core.ContainerState, error) {
	if err := r.connect(ctx); err != nil {
		return core.ContainerState{}, err
	}
	what := fmt.Sprintf("inspect swarm instance %s", short(id))
	svc, err := r.service(ctx, id, what)
	if err != nil {
		return core.ContainerState{}, err
	}
	tasks, err := r.tasks(ctx, id)
	if err != nil {
		return core.ContainerState{}, r.classify(err, what)
	}
	st := stateOf(svc, tasks)
	r.nameNode(ctx, &st)
	return st, nil
}

// BackendBinds returns, per port, the running task's IP and the container
// port (bindsOf): never a VIP, never a service name. The IP is the task's
// on the instance's primary network (the app's overlay, which the edge
// joins; this process's container joins it too, joinSelf, so its probes
// reach it). No running task, or none attached to that network, wraps
// core.ErrConflict.
func (r *Runtime) BackendBinds(ctx context.Context, id string, ports []core.PortSpec) ([]core.BackendBind, error) {
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("read backend binds of swarm instance %s", short(id))
	svc, err := r.service(ctx, id, what)
	if err != nil {
		return nil, err
	}
	target := bindNetwork(svc.Spec.TaskTemplate.Networks)
	if target == "" {
		return nil, fmt.Errorf("%s: %w: the service has no network", what, core.ErrConflict)
	}
	if err := r.joinSelf(ctx, target, what); err != nil {
		return nil, err
	}
	tasks, err := r.tasks(ctx, id)
	if err != nil {
		return nil, r.classify(err, what)
	}
	for _, t := range tasks {
		if t.Status.State == swarm.TaskStateRunning && t.DesiredState == swarm.TaskStateRunning {
			out, err := bindsOf(t, target, ports)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: %w: no running task", what, core.ErrConflict)
}

// service inspects the service with exactly this ID (Swarm also resolves
// names and ID prefixes, which R2 does not allow): anything else wraps
// core.ErrNotFound.
func (r *Runtime) service(ctx context.Context, id, what string) (swarm.Service, error) {
	res, err := r.cli.ServiceInspect(ctx, id, client.ServiceInspectOptions{})
	if err != nil {
		return swarm.Service{}, r.classify(err, what)
	}
	if res.Service.ID != id {
		return swarm.Service{}, fmt.Errorf("%s: no service with that exact ID: %w", what, core.ErrNotFound)
	}
	return res.Service, nil
}

// tasks lists the tasks of service id (the moby error unclassified).
func (r *Runtime) tasks(ctx context.Context, id string) ([]swarm.Task, error) {
	res, err := r.cli.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", id)})
	if err != nil {
		return nil, err
	}
	out := res.Items[:0]
	for _, t := range res.Items {
		if t.ServiceID == id {
			out = append(out, t)
		}
	}
	return out, nil
}

// taskIDs is the set of service id's task IDs (checking it exists).
func (r *Runtime) taskIDs(ctx context.Context, id, what string) (map[string]bool, error) {
	if _, err := r.service(ctx, id, what); err != nil {
		return nil, err
	}
	tasks, err := r.tasks(ctx, id)
	if err != nil {
		return nil, r.classify(err, what)
	}
	out := map[string]bool{}
	for _, t := range tasks {
		out[t.ID] = true
	}
	return out, nil
}

// update applies mutate to the service's current spec, retrying (3 times)
// when another writer updated it in between.
func (r *Runtime) update(ctx context.Context, id, what string, mutate func(*swarm.ServiceSpec)) error {
	var err error
	for range 3 {
		var svc swarm.Service
		if svc, err = r.service(ctx, id, what); err != nil {
			return err
		}
		spec := svc.Spec
		mutate(&spec)
		_, err = r.cli.ServiceUpdate(ctx, id, client.ServiceUpdateOptions{Version: svc.Version, Spec: spec})
		if err == nil || !strings.Contains(err.Error(), "out of sequence") {
			break
		}
	}
	if err != nil {
		return r.classify(err, what)
	}
	return nil
}

// setReplicas sets a replicated service's replica count.
func setReplicas(s *swarm.ServiceSpec, n uint64) {
	s.Mode = swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &n}}
}

// waitRunning waits until a task of service id runs: any task when fresh
// is false (a running instance is done at once), else a task not in
// before. A task not in before that fails or is rejected is an error with
// its message; so is check's error (nil: none), called while no task runs.
func (r *Runtime) waitRunning(ctx context.Context, id, what string, before map[string]bool, fresh bool, check func() error) error {
	return r.wait(ctx, id, what, func(tasks []swarm.Task) (bool, error) {
		for _, t := range tasks {
			isNew := !before[t.ID]
			if t.Status.State == swarm.TaskStateRunning && t.DesiredState == swarm.TaskStateRunning && (isNew || !fresh) {
				return true, nil
			}
			if isNew && (t.Status.State == swarm.TaskStateFailed || t.Status.State == swarm.TaskStateRejected) {
				return false, fmt.Errorf("%s: %w: %s", what, core.ErrUnavailable, taskError(t))
			}
		}
		if check != nil {
			return false, check()
		}
		return false, nil
	})
}

// wait polls the task list of service id until done says so, fails, or
// ctx ends (core.ErrUnavailable, with the current task's state).
func (r *Runtime) wait(ctx context.Context, id, what string, done func([]swarm.Task) (bool, error)) error {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	var last []swarm.Task
	for {
		tasks, err := r.tasks(ctx, id)
		switch {
		case err != nil && cerrdefs.IsNotFound(err):
			return fmt.Errorf("%s: %w: the service is gone", what, core.ErrNotFound)
		case err != nil && ctx.Err() == nil:
			return r.classify(err, what)
		case err == nil:
			last = tasks
			if ok, err := done(tasks); ok || err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			state := "no task"
			if cur, ok := currentTask(last); ok {
				state = taskError(cur)
			}
			return fmt.Errorf("%s: %w: %w (%s)", what, core.ErrUnavailable, ctx.Err(), state)
		case <-t.C:
		}
	}
}
