package coretest

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// peekID returns the ID the next create hands out. Caller holds r.mu.
func (r *Runtime) peekID() string {
	if len(r.NextIDs) > 0 {
		return r.NextIDs[0]
	}
	for n := r.nextID + 1; ; n++ {
		id := fmt.Sprintf("c-%d", n)
		if _, ok := r.cs[id]; !ok {
			return id
		}
	}
}

// CreateContainer implements core.Runtime (event create, Detail = name).
func (r *Runtime) CreateContainer(ctx context.Context, spec core.ContainerSpec) (string, error) {
	// The ID is taken under the lock before the create begins, so
	// creates running in parallel (a replica set) never share one; a
	// create that fails gives it back.
	r.mu.Lock()
	id := r.peekID()
	fromNext, prevNext := len(r.NextIDs) > 0, r.nextID
	if fromNext {
		r.NextIDs = r.NextIDs[1:]
	} else {
		fmt.Sscanf(id, "c-%d", &r.nextID)
	}
	taken := r.nextID
	r.mu.Unlock()
	if err := r.begin(ctx, MCreate, id); err != nil {
		r.mu.Lock()
		if fromNext {
			r.NextIDs = append([]string{id}, r.NextIDs...)
		} else if r.nextID == taken {
			r.nextID = prevNext
		}
		r.mu.Unlock()
		return "", err
	}
	r.mu.Lock()
	c := &fakeContainer{
		state: core.ContainerState{ID: id, Name: spec.Name, Image: spec.Image, Status: core.StatusCreated,
			Env: append([]string(nil), spec.Env...), Labels: maps.Clone(spec.Labels)},
		spec: spec, tcp: map[int]int{}, udp: map[int]int{},
	}
	tcpScripted, udpScripted := false, false
	if b, ok := r.pending[id]; ok {
		c.tcp, tcpScripted = b, true
		delete(r.pending, id)
	} else if len(r.NextBinds) > 0 {
		c.tcp, tcpScripted = copyPorts(r.NextBinds[0]), true
		r.NextBinds = r.NextBinds[1:]
	}
	if ls, ok := r.pendingLogs[id]; ok {
		c.logs = ls
		delete(r.pendingLogs, id)
	}
	if b, ok := r.pendingU[id]; ok {
		c.udp, udpScripted = b, true
		delete(r.pendingU, id)
	} else if len(r.NextUDPBinds) > 0 {
		c.udp, udpScripted = copyPorts(r.NextUDPBinds[0]), true
		r.NextUDPBinds = r.NextUDPBinds[1:]
	}
	for _, p := range spec.Ports {
		if p.Protocol == "udp" {
			if !udpScripted {
				c.udp[p.Port] = r.nextPort
				r.nextPort++
			}
		} else if !tcpScripted {
			c.tcp[p.Port] = r.nextPort
			r.nextPort++
		}
	}
	r.cs[id] = c
	r.order = append(r.order, id)
	r.created = append(r.created, spec)
	r.mu.Unlock()
	r.ev.AddDetail("create", id, spec.Name)
	return id, nil
}

// StartContainer implements core.Runtime (event start). The container then
// runs with start time SetStartTime's value, else StartTime.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	if err := r.begin(ctx, MStart, id); err != nil {
		return err
	}
	r.mu.Lock()
	c, ok := r.cs[id]
	if !ok {
		r.mu.Unlock()
		return notFound(id)
	}
	r.run(c)
	r.mu.Unlock()
	r.ev.Add("start", id)
	return nil
}

// run marks c running with its next start time. Caller holds r.mu.
func (r *Runtime) run(c *fakeContainer) {
	c.state.Status = core.StatusRunning
	c.state.StartedAt = r.StartTime
	if !c.startAt.IsZero() {
		c.state.StartedAt = c.startAt
		c.startAt = time.Time{}
	}
}

// StopContainer implements core.Runtime (event stop, Detail = grace).
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	if err := r.begin(ctx, MStop, id); err != nil {
		return err
	}
	r.mu.Lock()
	c, ok := r.cs[id]
	if !ok {
		r.mu.Unlock()
		return notFound(id)
	}
	if c.state.Status == core.StatusRunning || c.state.Status == core.StatusRestarting || c.state.Status == core.StatusPaused {
		c.state.Status = core.StatusExited
	}
	r.stops = append(r.stops, StopCall{ID: id, Grace: grace})
	r.mu.Unlock()
	r.ev.AddDetail("stop", id, grace.String())
	return nil
}

// RemoveContainer implements core.Runtime (event remove, Detail "force" or
// ""). Removing a running container without force fails with ErrConflict,
// as Docker does.
func (r *Runtime) RemoveContainer(ctx context.Context, id string, force bool) error {
	if err := r.begin(ctx, MRemove, id); err != nil {
		return err
	}
	r.mu.Lock()
	c, ok := r.cs[id]
	if !ok {
		r.mu.Unlock()
		return notFound(id)
	}
	if !force && c.state.Status == core.StatusRunning {
		r.mu.Unlock()
		r.ev.AddDetail("remove-failed", id, "running")
		return fmt.Errorf("container %s is running: stop it or force removal: %w", id, core.ErrConflict)
	}
	delete(r.cs, id)
	r.mu.Unlock()
	d := ""
	if force {
		d = "force"
	}
	r.ev.AddDetail("remove", id, d)
	return nil
}

// RestartContainer implements core.Runtime (event restart, Detail = grace).
func (r *Runtime) RestartContainer(ctx context.Context, id string, grace time.Duration) error {
	if err := r.begin(ctx, MRestart, id); err != nil {
		return err
	}
	r.mu.Lock()
	c, ok := r.cs[id]
	if !ok {
		r.mu.Unlock()
		return notFound(id)
	}
	r.run(c)
	r.mu.Unlock()
	r.ev.AddDetail("restart", id, grace.String())
	return nil
}

// InspectContainer implements core.Runtime (event inspect). A script from
// InspectSeq wins over the stored state.
func (r *Runtime) InspectContainer(ctx context.Context, id string) (core.ContainerState, error) {
	if err := r.begin(ctx, MInspect, id); err != nil {
		return core.ContainerState{}, err
	}
	r.mu.Lock()
	var st core.ContainerState
	if seq := r.seqs[id]; len(seq) > 0 {
		st = seq[0]
		if len(seq) > 1 {
			r.seqs[id] = seq[1:]
		}
	} else {
		c, ok := r.cs[id]
		if !ok {
			r.mu.Unlock()
			return core.ContainerState{}, notFound(id)
		}
		st = c.state
		st.Env = append([]string(nil), st.Env...)
		st.Labels = maps.Clone(st.Labels)
	}
	r.mu.Unlock()
	r.ev.Add("inspect", id)
	return st, nil
}

// BackendBinds implements core.Runtime (event binds): every port at the
// container's address when SetAddress gave it one, else its loopback
// binds. A requested port without a bind is an error.
func (r *Runtime) BackendBinds(ctx context.Context, id string, ports []core.PortSpec) ([]core.BackendBind, error) {
	if err := r.begin(ctx, MBinds, id); err != nil {
		return nil, err
	}
	r.mu.Lock()
	c, ok := r.cs[id]
	if !ok {
		r.mu.Unlock()
		return nil, notFound(id)
	}
	var out []core.BackendBind
	for _, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		if c.ip != "" {
			out = append(out, core.BackendBind{ContainerPort: p.Port, HostPort: p.Port, Protocol: proto, IP: c.ip, Network: c.net})
			continue
		}
		m := c.tcp
		if proto == "udp" {
			m = c.udp
		}
		hp, ok := m[p.Port]
		if !ok {
			r.mu.Unlock()
			return nil, fmt.Errorf("container %s: no loopback bind for %d/%s", id, p.Port, proto)
		}
		out = append(out, core.BackendBind{ContainerPort: p.Port, HostPort: hp, Protocol: proto})
	}
	r.mu.Unlock()
	r.ev.Add("binds", id)
	return out, nil
}

// Logs implements core.Runtime: the lines of LogsFor at or after
// opts.Since, the last opts.Tail of them. Follow is ignored (logs end).
func (r *Runtime) Logs(ctx context.Context, id string, opts core.LogOptions, fn func(core.LogLine) error) error {
	if err := r.begin(ctx, MLogs, id); err != nil {
		return err
	}
	r.mu.Lock()
	c, ok := r.cs[id]
	if !ok {
		r.mu.Unlock()
		return notFound(id)
	}
	var lines []core.LogLine
	for _, l := range c.logs {
		if opts.Since.IsZero() || !l.Time.Before(opts.Since) {
			lines = append(lines, l)
		}
	}
	r.mu.Unlock()
	if opts.Tail > 0 && len(lines) > opts.Tail {
		lines = lines[len(lines)-opts.Tail:]
	}
	for _, l := range lines {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return nil
}

// ListManaged implements core.Runtime: existing containers whose labels
// include every given label, in creation order.
func (r *Runtime) ListManaged(ctx context.Context, labels map[string]string) ([]core.ContainerState, error) {
	if err := r.begin(ctx, MList, ""); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []core.ContainerState
	for _, id := range r.order {
		c, ok := r.cs[id]
		if !ok {
			continue
		}
		match := true
		for k, v := range labels {
			if c.state.Labels[k] != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, c.state)
		}
	}
	return out, nil
}

func copyPorts(m map[int]int) map[int]int {
	out := make(map[int]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
