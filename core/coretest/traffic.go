package coretest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// Traffic is a recording fake core.Traffic (SPEC §3 "Recording traffic"):
// Apply appends "traffic" (Detail = generation) to Events, records the graph
// and returns an incrementing generation; a failed apply appends
// "traffic-failed" and records nothing. The store-backed semantics (binds
// dropped from ACTIVE, rebuild routes exactly ACTIVE) come from the
// engine's own withdraw/rebuild over MemStore.
type Traffic struct {
	// ApplyFn, if set, runs before each apply; an error rejects it.
	ApplyFn func(ctx context.Context, g routetable.Graph) error
	// StatusFn, if set, answers Status.
	StatusFn func(ctx context.Context) (core.TrafficStatus, error)
	// Counts, if set, gives the cumulative request and error counts Status
	// reports for each backend of the last applied graph's HTTP routes
	// (SPEC R76's monitor reads them); calls counts the Status calls so far.
	Counts func(b routetable.Backend, calls int) (requests, errors int64)

	ev       *Events
	mu       sync.Mutex
	gen      uint64
	graphs   []routetable.Graph
	attempts int
	failN    int
	failErr  error
	inflight map[string]int64
	drainSeq map[string][]int64
	calls    int
}

var _ core.Traffic = (*Traffic)(nil)

// NewTraffic returns a fake that accepts every apply.
func NewTraffic(ev *Events) *Traffic {
	return &Traffic{ev: ev, inflight: map[string]int64{}, drainSeq: map[string][]int64{}}
}

// FailApplies makes the next n applies fail (error wrapping ErrUnavailable).
func (t *Traffic) FailApplies(n int) {
	t.mu.Lock()
	t.failN = n
	t.failErr = nil
	t.mu.Unlock()
}

// FailAppliesWith makes the next n applies fail with err.
func (t *Traffic) FailAppliesWith(n int, err error) {
	t.mu.Lock()
	t.failN, t.failErr = n, err
	t.mu.Unlock()
}

// SetInFlight sets the in-flight count Status reports for addr.
func (t *Traffic) SetInFlight(addr string, n int64) {
	t.mu.Lock()
	t.inflight[addr] = n
	t.mu.Unlock()
}

// InFlightSeq scripts the counts successive Status calls report for addr;
// the last one repeats.
func (t *Traffic) InFlightSeq(addr string, counts ...int64) {
	t.mu.Lock()
	t.drainSeq[addr] = counts
	t.mu.Unlock()
}

// Apply implements core.Traffic.
func (t *Traffic) Apply(ctx context.Context, g routetable.Graph) (uint64, error) {
	t.mu.Lock()
	t.attempts++
	fn := t.ApplyFn
	var err error
	if t.failN > 0 {
		t.failN--
		err = t.failErr
		if err == nil {
			err = fmt.Errorf("edge rejected route table: %w", core.ErrUnavailable)
		}
	}
	t.mu.Unlock()
	if err == nil && fn != nil {
		err = fn(ctx, g)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		t.ev.AddDetail("traffic-failed", "", err.Error())
		return 0, err
	}
	t.mu.Lock()
	t.gen++
	gen := t.gen
	t.graphs = append(t.graphs, copyGraph(g))
	t.mu.Unlock()
	t.ev.AddDetail("traffic", "", strconv.FormatUint(gen, 10))
	return gen, nil
}

// Status implements core.Traffic: the applied generation and the in-flight
// counts set by SetInFlight/InFlightSeq.
func (t *Traffic) Status(ctx context.Context) (core.TrafficStatus, error) {
	if t.StatusFn != nil {
		return t.StatusFn(ctx)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := core.TrafficStatus{AppliedGeneration: t.gen}
	addrs := map[string]int64{}
	for a, n := range t.inflight {
		addrs[a] = n
	}
	for a, seq := range t.drainSeq {
		if len(seq) > 0 {
			addrs[a] = seq[0]
			if len(seq) > 1 {
				t.drainSeq[a] = seq[1:]
			}
		}
	}
	var keys []string
	for a := range addrs {
		keys = append(keys, a)
	}
	counted := t.countsLocked()
	for a := range counted {
		if _, ok := addrs[a]; !ok {
			keys = append(keys, a)
		}
	}
	sort.Strings(keys)
	for _, a := range keys {
		c := counted[a]
		st.Backends = append(st.Backends, routetable.BackendStatus{Addr: a, InFlight: addrs[a], Requests: c[0], Errors: c[1]})
	}
	return st, nil
}

var _ core.TrafficRoutes = (*Traffic)(nil)

// countsLocked evaluates Counts over the last graph's HTTP backends
// (nil without Counts); t.mu is held.
func (t *Traffic) countsLocked() map[string][2]int64 {
	if t.Counts == nil {
		return nil
	}
	t.calls++
	out := map[string][2]int64{}
	if len(t.graphs) == 0 {
		return out
	}
	for _, r := range t.graphs[len(t.graphs)-1].HTTP {
		for _, b := range r.Backends {
			req, errs := t.Counts(b, t.calls)
			out[b.Addr] = [2]int64{req, errs}
		}
	}
	return out
}

// Routes implements core.TrafficRoutes: the last accepted graph.
func (t *Traffic) Routes(ctx context.Context) (routetable.Graph, error) {
	return t.Last(), nil
}

// Graphs returns every accepted graph in order.
func (t *Traffic) Graphs() []routetable.Graph {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]routetable.Graph, len(t.graphs))
	for i, g := range t.graphs {
		out[i] = copyGraph(g)
	}
	return out
}

// Last returns the last accepted graph (zero Graph when none).
func (t *Traffic) Last() routetable.Graph {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.graphs) == 0 {
		return routetable.Graph{}
	}
	return copyGraph(t.graphs[len(t.graphs)-1])
}

// Applied returns the number of accepted applies; Attempts counts all.
func (t *Traffic) Applied() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.graphs)
}

// Attempts returns the number of Apply calls, accepted or not.
func (t *Traffic) Attempts() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attempts
}

// BackendAddrs returns every backend address of g (HTTP backends, TCP and
// UDP backends), sorted and deduplicated.
func BackendAddrs(g routetable.Graph) []string {
	seen := map[string]bool{}
	for _, r := range g.HTTP {
		for _, b := range r.Backends {
			seen[b.Addr] = true
		}
	}
	for _, r := range g.TCP {
		seen[r.Backend] = true
	}
	for _, r := range g.UDP {
		seen[r.Backend] = true
	}
	out := []string{}
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// HostPorts returns the loopback host ports g routes to for app/service
// (HTTP, TCP and UDP), sorted: S17's "last route {8080:18081}" becomes
// HostPorts(last, "blog", "web") == []int{18081}.
func HostPorts(g routetable.Graph, app, service string) []int {
	seen := map[int]bool{}
	add := func(addr string) {
		if i := strings.LastIndex(addr, ":"); i >= 0 {
			if p, err := strconv.Atoi(addr[i+1:]); err == nil {
				seen[p] = true
			}
		}
	}
	for _, r := range g.HTTP {
		if r.App == app && r.Service == service {
			for _, b := range r.Backends {
				add(b.Addr)
			}
		}
	}
	for _, r := range append(append([]routetable.L4Route(nil), g.TCP...), g.UDP...) {
		if r.App == app && r.Service == service {
			add(r.Backend)
		}
	}
	out := []int{}
	for p := range seen {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}

func copyGraph(g routetable.Graph) routetable.Graph {
	var out routetable.Graph
	b, err := json.Marshal(g)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
