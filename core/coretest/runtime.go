package coretest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Runtime method names accepted by Fail and counted by Calls.
const (
	MCreate        = "create"
	MStart         = "start"
	MStop          = "stop"
	MRemove        = "remove"
	MRestart       = "restart"
	MInspect       = "inspect"
	MBinds         = "binds"
	MLogs          = "logs"
	MResolve       = "resolve"
	MPull          = "pull"
	MEnsureNetwork = "ensure-network"
	MEnsureVolume  = "ensure-volume"
	MList          = "list"
	MInfo          = "info"
	MInspectVolume = "inspect-volume"
	MRemoveNetwork = "remove-network"
)

// StopCall is one successful StopContainer call.
type StopCall struct {
	ID    string
	Grace time.Duration
}

type fakeContainer struct {
	state   core.ContainerState
	spec    core.ContainerSpec
	tcp     map[int]int
	udp     map[int]int
	startAt time.Time // overrides Runtime.StartTime on the next start/restart
	logs    []core.LogLine
}

type failure struct {
	method, id string
	err        error
	times      int // < 0: forever
}

// Runtime is a stateful fake core.Runtime: a map of containers plus an
// effect log. Successful effects append to Events: create (ID), start, stop
// (Detail = grace), remove (Detail "force" or ""), restart (Detail = grace),
// inspect, binds, pull (ID = ref), ensure-network, ensure-volume (ID =
// name). A call failed by Fail or Hook appends "<kind>-failed" instead.
// Unknown IDs return errors wrapping core.ErrNotFound. Safe for concurrent
// use. Configure the exported fields before the engine runs.
type Runtime struct {
	// NextIDs are the IDs CreateContainer hands out, in order; when
	// exhausted it uses "c-1", "c-2", … (skipping IDs in use).
	NextIDs []string
	// NextBinds are the TCP binds (container port → host port) of created
	// containers, in creation order; when exhausted (and no SetBinds for the
	// ID), each published port gets the next port from 18080 upward.
	NextBinds []map[int]int
	// NextUDPBinds likewise for UDP ports.
	NextUDPBinds []map[int]int
	// StartTime is the start time a (re)started container reports (default T0).
	StartTime time.Time
	// Images maps a reference to its resolution; absent references resolve
	// to DigestFor(ref).
	Images map[string]core.ImageRef
	// Hook, if set, runs before every method (method name, container ID or
	// ref); an error fails the call like Fail.
	Hook func(ctx context.Context, method, id string) error

	ev          *Events
	mu          sync.Mutex
	cs          map[string]*fakeContainer
	order       []string
	created     []core.ContainerSpec
	stops       []StopCall
	fails       []*failure
	seqs        map[string][]core.ContainerState
	calls       map[string]int
	nextPort    int
	nextID      int
	pending     map[string]map[int]int // SetBinds for future IDs
	pendingU    map[string]map[int]int
	pendingLogs map[string][]core.LogLine
	networks    map[string]bool
	volumes     map[string]map[string]string // name → labels
}

var _ core.Runtime = (*Runtime)(nil)

// NewRuntime returns an empty fake runtime logging to ev (nil = no log).
func NewRuntime(ev *Events) *Runtime {
	return &Runtime{
		StartTime: T0, ev: ev,
		cs: map[string]*fakeContainer{}, seqs: map[string][]core.ContainerState{},
		calls: map[string]int{}, nextPort: 18080,
		pending: map[string]map[int]int{}, pendingU: map[string]map[int]int{},
		pendingLogs: map[string][]core.LogLine{},
		networks:    map[string]bool{}, volumes: map[string]map[string]string{},
	}
}

// DigestFor is the digest the fake resolves an un-configured reference to:
// the part after "@" when ref is pinned, else "sha256:" + sha256(ref).
func DigestFor(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return ref[i+1:]
	}
	sum := sha256.Sum256([]byte(ref))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ImageRefFor is the fake's default resolution of ref.
func ImageRefFor(ref string) core.ImageRef {
	d := DigestFor(ref)
	repo := ref
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		repo = ref[:i]
	}
	return core.ImageRef{Ref: repo + "@" + d, Digest: d, ID: d}
}

// AddContainer seeds a container. st.ID is set to id; an empty Status means
// running; a running container with zero StartedAt gets StartTime. binds
// are its TCP backend binds (container port → host port).
func (r *Runtime) AddContainer(id string, st core.ContainerState, binds map[int]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st.ID = id
	if st.Status == "" {
		st.Status = core.StatusRunning
	}
	if st.Status == core.StatusRunning && st.StartedAt.IsZero() {
		st.StartedAt = r.StartTime
	}
	if _, ok := r.cs[id]; !ok {
		r.order = append(r.order, id)
	}
	r.cs[id] = &fakeContainer{state: st, tcp: copyPorts(binds), udp: map[int]int{}}
}

// SetBinds sets the TCP binds of id (existing, or applied when id is created).
func (r *Runtime) SetBinds(id string, binds map[int]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cs[id]; ok {
		c.tcp = copyPorts(binds)
		return
	}
	r.pending[id] = copyPorts(binds)
}

// SetUDPBinds sets the UDP binds of id (existing, or applied at creation).
func (r *Runtime) SetUDPBinds(id string, binds map[int]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cs[id]; ok {
		c.udp = copyPorts(binds)
		return
	}
	r.pendingU[id] = copyPorts(binds)
}

// SetState changes a container's status (and start time when non-zero).
func (r *Runtime) SetState(id, status string, startedAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cs[id]; ok {
		c.state.Status = status
		if !startedAt.IsZero() {
			c.state.StartedAt = startedAt
		}
	}
}

// SetExit makes id exited with code (and an OOM kill when oom), as the
// engine reports a process that ended by itself.
func (r *Runtime) SetExit(id string, code int, oom bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cs[id]; ok {
		c.state.Status, c.state.ExitCode, c.state.OOMKilled = core.StatusExited, code, oom
	}
}

// SetHealth sets the health status an inspect of id reports ("", starting,
// healthy, unhealthy) and marks the image as having a healthcheck.
func (r *Runtime) SetHealth(id, health string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cs[id]; ok {
		c.state.Health = health
		c.state.HasHealthcheck = true
	}
}

// SetStartTime makes the next start/restart of id report t.
func (r *Runtime) SetStartTime(id string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cs[id]; ok {
		c.startAt = t
	}
}

// Delete makes id vanish (as if removed behind the engine's back).
func (r *Runtime) Delete(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cs, id)
}

// Fail makes the next times calls of method on id fail with err (id ""
// matches any ID; times <= 0 means every call). Failures stack in the order
// added. Methods: create, start, stop, remove, restart, inspect, binds,
// logs, resolve, pull, ensure-network, ensure-volume, list, info. For
// create the id is the ID that would be handed out.
func (r *Runtime) Fail(method, id string, err error, times int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if times <= 0 {
		times = -1
	}
	r.fails = append(r.fails, &failure{method: method, id: id, err: err, times: times})
}

// InspectSeq scripts successive InspectContainer results of id (S45, S46):
// each call consumes one state; the last one repeats. Empty IDs are set to
// id. A scripted inspect does not change the container itself.
func (r *Runtime) InspectSeq(id string, states ...core.ContainerState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range states {
		if states[i].ID == "" {
			states[i].ID = id
		}
	}
	r.seqs[id] = states
}

// LogsFor sets the log lines of id (stdout, stamped with StartTime); for
// an ID not created yet they apply when it is created.
func (r *Runtime) LogsFor(id string, lines ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ls []core.LogLine
	for _, l := range lines {
		ls = append(ls, core.LogLine{Time: r.StartTime, Stream: "stdout", Text: l})
	}
	if c, ok := r.cs[id]; ok {
		c.logs = ls
		return
	}
	r.pendingLogs[id] = ls
}

// Stops returns every successful stop in order.
func (r *Runtime) Stops() []StopCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]StopCall(nil), r.stops...)
}

// Created returns the spec of every created container in order.
func (r *Runtime) Created() []core.ContainerSpec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.ContainerSpec(nil), r.created...)
}

// Running reports whether id exists and is running.
func (r *Runtime) Running(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.cs[id]
	return ok && c.state.Status == core.StatusRunning
}

// Exists reports whether id exists.
func (r *Runtime) Exists(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.cs[id]
	return ok
}

// State returns the stored state of id.
func (r *Runtime) State(id string) (core.ContainerState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.cs[id]
	if !ok {
		return core.ContainerState{}, false
	}
	return c.state, true
}

// Containers returns the IDs of existing containers in creation order.
func (r *Runtime) Containers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, id := range r.order {
		if _, ok := r.cs[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

// Calls returns how many times method was called (successful or not).
func (r *Runtime) Calls(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

// begin counts the call, runs Hook and the failure table. Caller must not
// hold r.mu.
func (r *Runtime) begin(ctx context.Context, method, id string) error {
	r.mu.Lock()
	r.calls[method]++
	var err error
	for _, f := range r.fails {
		if f.times == 0 || f.method != method || (f.id != "" && f.id != id) {
			continue
		}
		if f.times > 0 {
			f.times--
		}
		err = f.err
		break
	}
	hook := r.Hook
	r.mu.Unlock()
	if err == nil && hook != nil {
		err = hook(ctx, method, id)
	}
	if err != nil {
		r.ev.AddDetail(method+"-failed", id, err.Error())
	}
	return err
}

func notFound(id string) error { return fmt.Errorf("container %s: %w", id, core.ErrNotFound) }

// Info implements core.Runtime.
func (r *Runtime) Info(ctx context.Context) (core.RuntimeInfo, error) {
	if err := r.begin(ctx, MInfo, ""); err != nil {
		return core.RuntimeInfo{}, err
	}
	return core.RuntimeInfo{Name: "fake", Version: "0", APIVersion: "1.41"}, nil
}

// ResolveImage implements core.Runtime (no event).
func (r *Runtime) ResolveImage(ctx context.Context, ref string) (core.ImageRef, error) {
	if err := r.begin(ctx, MResolve, ref); err != nil {
		return core.ImageRef{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if im, ok := r.Images[ref]; ok {
		return im, nil
	}
	return ImageRefFor(ref), nil
}

// PullImage implements core.Runtime (event pull).
func (r *Runtime) PullImage(ctx context.Context, ref string) error {
	if err := r.begin(ctx, MPull, ref); err != nil {
		return err
	}
	r.ev.Add("pull", ref)
	return nil
}

// EnsureNetwork implements core.Runtime (event ensure-network); the ID is
// "net-<name>".
func (r *Runtime) EnsureNetwork(ctx context.Context, n core.NetworkSpec) (string, error) {
	if err := r.begin(ctx, MEnsureNetwork, n.Name); err != nil {
		return "", err
	}
	r.mu.Lock()
	r.networks[n.Name] = true
	r.mu.Unlock()
	r.ev.Add("ensure-network", n.Name)
	return "net-" + n.Name, nil
}

// EnsureVolume implements core.Runtime (event ensure-volume).
func (r *Runtime) EnsureVolume(ctx context.Context, v core.VolumeSpec) error {
	if err := r.begin(ctx, MEnsureVolume, v.Name); err != nil {
		return err
	}
	r.mu.Lock()
	if _, ok := r.volumes[v.Name]; !ok {
		// Like Docker: an existing volume keeps the labels it was created with.
		r.volumes[v.Name] = copyLabels(v.Labels)
	}
	r.mu.Unlock()
	r.ev.Add("ensure-volume", v.Name)
	return nil
}

var (
	_ core.VolumeInspector = (*Runtime)(nil)
	_ core.NetworkRemover  = (*Runtime)(nil)
)

// AddVolume seeds an existing volume with labels (nil: unlabelled).
func (r *Runtime) AddVolume(name string, labels map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.volumes[name] = copyLabels(labels)
}

// InspectVolume implements core.VolumeInspector (no event; absent →
// ErrNotFound).
func (r *Runtime) InspectVolume(ctx context.Context, name string) (core.VolumeState, error) {
	if err := r.begin(ctx, MInspectVolume, name); err != nil {
		return core.VolumeState{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.volumes[name]
	if !ok {
		return core.VolumeState{}, fmt.Errorf("volume %s: %w", name, core.ErrNotFound)
	}
	return core.VolumeState{Name: name, Labels: copyLabels(l)}, nil
}

// RemoveNetwork implements core.NetworkRemover (event remove-network; an
// absent network is no error).
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	if err := r.begin(ctx, MRemoveNetwork, name); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.networks, name)
	r.mu.Unlock()
	r.ev.Add("remove-network", name)
	return nil
}

// Networks returns the names of existing networks, sorted.
func (r *Runtime) Networks() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.networks {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Volumes returns the names of ensured volumes, sorted.
func (r *Runtime) Volumes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for v := range r.volumes {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

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
	r.mu.Lock()
	id := r.peekID()
	r.mu.Unlock()
	if err := r.begin(ctx, MCreate, id); err != nil {
		return "", err
	}
	r.mu.Lock()
	if len(r.NextIDs) > 0 {
		r.NextIDs = r.NextIDs[1:]
	} else {
		fmt.Sscanf(id, "c-%d", &r.nextID)
	}
	c := &fakeContainer{
		state: core.ContainerState{ID: id, Name: spec.Name, Image: spec.Image, Status: core.StatusCreated,
			Env: append([]string(nil), spec.Env...), Labels: copyLabels(spec.Labels)},
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
		st.Labels = copyLabels(st.Labels)
	}
	r.mu.Unlock()
	r.ev.Add("inspect", id)
	return st, nil
}

// BackendBinds implements core.Runtime (event binds). A requested port
// without a bind is an error.
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

func copyLabels(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
