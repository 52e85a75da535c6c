package swarm

import (
	"fmt"
	"strings"

	"github.com/moby/moby/api/types/swarm"

	"github.com/gordon-deploy/docker-gordon/core"
)

// terminal reports whether a task state is final (its container is gone
// or never ran).
func terminal(s swarm.TaskState) bool {
	switch s {
	case swarm.TaskStateComplete, swarm.TaskStateShutdown, swarm.TaskStateFailed,
		swarm.TaskStateRejected, swarm.TaskStateRemove, swarm.TaskStateOrphaned:
		return true
	}
	return false
}

// live reports whether a task's container may be running: it has started
// (starting or running) and not reached a final state.
func live(t swarm.Task) bool {
	return t.Status.State == swarm.TaskStateStarting || t.Status.State == swarm.TaskStateRunning
}

// currentTask is the task that stands for the instance: the newest task
// Swarm wants running, else the newest task; ok is false without tasks.
// Newest is by the task's last state change (then its creation).
func currentTask(tasks []swarm.Task) (swarm.Task, bool) {
	var best swarm.Task
	found := false
	for _, t := range tasks {
		if !found || newer(t, best) {
			best, found = t, true
		}
	}
	return best, found
}

// newer orders tasks: desired-running before the rest, then the later
// status change, then the later creation.
func newer(a, b swarm.Task) bool {
	ar, br := a.DesiredState == swarm.TaskStateRunning, b.DesiredState == swarm.TaskStateRunning
	if ar != br {
		return ar
	}
	if !a.Status.Timestamp.Equal(b.Status.Timestamp) {
		return a.Status.Timestamp.After(b.Status.Timestamp)
	}
	return a.CreatedAt.After(b.CreatedAt)
}

// stateOf maps a service (one instance) and its tasks onto the engine's
// container state:
//   - no task yet: created (never started);
//   - the current task starting or running: running, started at its last
//     state change; with a healthcheck, health is starting while the task
//     is starting (Swarm holds a task there until its container is
//     healthy, and fails it when it turns unhealthy) and healthy once it
//     runs;
//   - not yet started (new … ready): created;
//   - final (complete, shutdown, failed, rejected, …): exited, with the
//     container's exit code (rejected: dead);
//
// and the service's name, labels, image, env and restart policy.
func stateOf(svc swarm.Service, tasks []swarm.Task) core.ContainerState {
	st := core.ContainerState{ID: svc.ID, Name: svc.Spec.Name, Labels: svc.Spec.Labels, Status: core.StatusCreated}
	if cs := svc.Spec.TaskTemplate.ContainerSpec; cs != nil {
		st.Image, st.Env = cs.Image, cs.Env
		if hc := cs.Healthcheck; hc != nil && len(hc.Test) > 0 && hc.Test[0] != "NONE" {
			st.HasHealthcheck = true
		}
	}
	st.RestartPolicy = restartPolicyName(svc.Spec.TaskTemplate.RestartPolicy)
	t, ok := currentTask(tasks)
	if !ok {
		return st
	}
	s := t.Status
	st.Node = t.NodeID // nameNode turns it into the hostname
	switch {
	case live(t):
		st.Status = core.StatusRunning
		st.StartedAt = s.Timestamp.UTC()
		if st.HasHealthcheck {
			st.Health = "healthy"
			if s.State == swarm.TaskStateStarting {
				st.Health = "starting"
			}
		}
	case !terminal(s.State):
		// created: scheduled, not started yet
	case s.State == swarm.TaskStateRejected:
		st.Status = core.StatusDead
	default:
		st.Status = core.StatusExited
		if c := s.ContainerStatus; c != nil {
			st.ExitCode = c.ExitCode
		}
		if st.HasHealthcheck && strings.Contains(s.Err, "unhealthy") {
			st.Health, st.HealthLog = "unhealthy", s.Err
		}
	}
	return st
}

// taskError is why a task failed or was rejected: its error, else its
// message, with its state and exit code.
func taskError(t swarm.Task) string {
	msg := t.Status.Err
	if msg == "" {
		msg = t.Status.Message
	}
	s := fmt.Sprintf("task %s %s: %s", short(t.ID), t.Status.State, msg)
	if c := t.Status.ContainerStatus; c != nil && c.ExitCode != 0 {
		s += fmt.Sprintf(" (exit code %d)", c.ExitCode)
	}
	return s
}

// bindNetwork is the network the edge reaches a task on: the service's
// first (the app's overlay); "" without any.
func bindNetwork(nets []swarm.NetworkAttachmentConfig) string {
	if len(nets) > 0 {
		return nets[0].Target
	}
	return ""
}

// bindsOf returns the endpoint of each port of a running task: the task's
// address on the network named (or with the ID) network, without its
// prefix length, and the container port. Never a VIP nor a name: the edge
// dials this one task. No address there wraps core.ErrConflict; a bad
// port wraps core.ErrInvalid.
func bindsOf(t swarm.Task, network string, ports []core.PortSpec) ([]core.BackendBind, error) {
	var ip, name string
	for _, a := range t.NetworksAttachments {
		if a.Network.ID != network && a.Network.Spec.Name != network {
			continue
		}
		for _, p := range a.Addresses {
			if p.IsValid() {
				ip, name = p.Addr().String(), a.Network.Spec.Name
				break
			}
		}
	}
	if ip == "" {
		return nil, fmt.Errorf("task %s (%s) has no address on network %q: %w", short(t.ID), t.Status.State, network, core.ErrConflict)
	}
	out := make([]core.BackendBind, 0, len(ports))
	for _, p := range ports {
		if err := checkPort(p); err != nil {
			return nil, fmt.Errorf("%w: %w", core.ErrInvalid, err)
		}
		proto := strings.ToLower(p.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		out = append(out, core.BackendBind{ContainerPort: p.Port, HostPort: p.Port, Protocol: proto, IP: ip, Network: name})
	}
	return out, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
