package sdktest_test

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// recRuntime is a core.Runtime that records the arguments it received and
// returns canned results, or err for every method when err is set.
type recRuntime struct {
	mu    sync.Mutex
	calls map[string][]any
	err   error

	info   core.RuntimeInfo
	image  core.ImageRef
	state  core.ContainerState
	binds  []core.BackendBind
	list   []core.ContainerState
	lines  []core.LogLine
	follow bool // Logs blocks after lines until ctx ends
	// logsEnded receives the error Logs saw end the stream.
	logsEnded chan error
}

func (r *recRuntime) rec(method string, args ...any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string][]any{}
	}
	r.calls[method] = args
	return r.err
}

func (r *recRuntime) args(method string) []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

func (r *recRuntime) Info(context.Context) (core.RuntimeInfo, error) {
	return r.info, r.rec("Info")
}
func (r *recRuntime) ResolveImage(_ context.Context, ref string) (core.ImageRef, error) {
	return r.image, r.rec("ResolveImage", ref)
}
func (r *recRuntime) PullImage(_ context.Context, ref string) error { return r.rec("PullImage", ref) }
func (r *recRuntime) EnsureNetwork(_ context.Context, n core.NetworkSpec) (string, error) {
	return "net-" + n.Name, r.rec("EnsureNetwork", n)
}
func (r *recRuntime) EnsureVolume(_ context.Context, v core.VolumeSpec) error {
	return r.rec("EnsureVolume", v)
}
func (r *recRuntime) CreateContainer(_ context.Context, s core.ContainerSpec) (string, error) {
	return "id-" + s.Name, r.rec("CreateContainer", s)
}
func (r *recRuntime) StartContainer(_ context.Context, id string) error {
	return r.rec("StartContainer", id)
}
func (r *recRuntime) StopContainer(_ context.Context, id string, grace time.Duration) error {
	return r.rec("StopContainer", id, grace)
}
func (r *recRuntime) RemoveContainer(_ context.Context, id string, force bool) error {
	return r.rec("RemoveContainer", id, force)
}
func (r *recRuntime) RestartContainer(_ context.Context, id string, grace time.Duration) error {
	return r.rec("RestartContainer", id, grace)
}
func (r *recRuntime) InspectContainer(_ context.Context, id string) (core.ContainerState, error) {
	return r.state, r.rec("InspectContainer", id)
}
func (r *recRuntime) BackendBinds(_ context.Context, id string, ports []core.PortSpec) ([]core.BackendBind, error) {
	return r.binds, r.rec("BackendBinds", id, ports)
}
func (r *recRuntime) Logs(ctx context.Context, id string, opts core.LogOptions, fn func(core.LogLine) error) error {
	if err := r.rec("Logs", id, opts); err != nil {
		return err
	}
	end := func(err error) error {
		if r.logsEnded != nil {
			r.logsEnded <- err
		}
		return err
	}
	for _, l := range r.lines {
		if err := fn(l); err != nil {
			return end(err)
		}
	}
	if r.follow {
		<-ctx.Done()
		return end(ctx.Err())
	}
	return end(nil)
}
func (r *recRuntime) ListManaged(_ context.Context, labels map[string]string) ([]core.ContainerState, error) {
	return r.list, r.rec("ListManaged", labels)
}

// recProbe records the last request and answers with res/err; when block
// is set, Check waits for the caller's context to end.
type recProbe struct {
	mu       sync.Mutex
	req      core.ProbeRequest
	config   json.RawMessage
	res      core.ProbeResult
	err      error
	block    bool
	problems []string
}

func (p *recProbe) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "rec", Protocol: 1, ConfigSchema: `{"type":"object"}`, Version: "0.1"}, p.err
}
func (p *recProbe) ValidateConfig(_ context.Context, config json.RawMessage) ([]string, error) {
	p.mu.Lock()
	p.config = config
	p.mu.Unlock()
	return p.problems, p.err
}
func (p *recProbe) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	p.mu.Lock()
	p.req = req
	p.mu.Unlock()
	if p.block {
		<-ctx.Done()
		return core.ProbeResult{}, ctx.Err()
	}
	return p.res, p.err
}

// recTraffic records the applied graph and answers with gen/status/err.
type recTraffic struct {
	mu     sync.Mutex
	graph  routetable.Graph
	gen    uint64
	status core.TrafficStatus
	err    error
}

func (t *recTraffic) Apply(_ context.Context, g routetable.Graph) (uint64, error) {
	t.mu.Lock()
	t.graph = g
	t.mu.Unlock()
	return t.gen, t.err
}
func (t *recTraffic) Status(context.Context) (core.TrafficStatus, error) { return t.status, t.err }
