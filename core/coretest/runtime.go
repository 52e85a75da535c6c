package coretest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
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
	ip, net string    // SetAddress: binds are reported at ip on net
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
	exec        ExecFunc
	stream      StreamFunc
	execs       []ExecCall
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

// SetAddress makes BackendBinds of the existing container id report
// every requested port at ip on network (HostPort = the container port),
// as a runtime that reaches container IPs does (SPEC R18); ip "" returns
// it to its loopback binds.
func (r *Runtime) SetAddress(id, network, ip string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cs[id]; ok {
		c.ip, c.net = ip, network
	}
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
		r.volumes[v.Name] = maps.Clone(v.Labels)
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
	r.volumes[name] = maps.Clone(labels)
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
	return core.VolumeState{Name: name, Labels: maps.Clone(l)}, nil
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
