package coretest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// Harness is an engine.Engine wired to the fakes, all logging to one Events.
type Harness struct {
	T       testing.TB
	Events  *Events
	Store   *MemStore
	Runtime *Runtime
	Traffic *Traffic
	Prober  *Prober
	Probes  *ProbeSet
	Clock   *Clock
	Engine  *engine.Engine

	mu       sync.Mutex
	progress []engine.ProgressEvent
	opN      int
}

// NewEngine returns a harness whose Engine has Store = MemStore, Runtime,
// Traffic, Readiness = &engine.ReadinessWaiter{Probes: ProbeSet} (the prober
// answers ready unless scripted), Clock at T0, NewOpID "op-1", "op-2", …,
// DrainPoll 1 ms and DrainTimeout 50 ms (tests stay fast), a test logger,
// Progress recorded (Progress()), and OnEffect appending engine-internal
// effects ("withdraw" with id "app/service") to Events.
func NewEngine(t testing.TB) *Harness {
	ev := &Events{}
	clock := &Clock{T: T0}
	h := &Harness{T: t, Events: ev, Clock: clock}
	h.Store = NewMemStore(ev)
	h.Store.Now = clock.Now
	h.Runtime = NewRuntime(ev)
	h.Traffic = NewTraffic(ev)
	h.Prober = NewProber(ev)
	h.Probes = NewProbeSet(h.Prober)
	h.Engine = &engine.Engine{
		Store:        h.Store,
		Runtime:      h.Runtime,
		Traffic:      h.Traffic,
		Readiness:    &engine.ReadinessWaiter{Probes: h.Probes},
		Clock:        clock,
		Logger:       hclog.NewNullLogger(),
		NewOpID:      h.nextOpID,
		Holder:       core.LockHolder{PID: 1, Host: "test"},
		LockTimeout:  2 * time.Second,
		DrainTimeout: 50 * time.Millisecond,
		DrainPoll:    time.Millisecond,
		// The flows under test approve every privileged option; the
		// privilege tests set a policy of their own.
		PrivilegePolicy: func(string, *core.ServiceSpec) error { return nil },
		OnEffect: func(kind, id, detail string) {
			ev.AddDetail(kind, id, detail)
		},
		Progress: func(p engine.ProgressEvent) {
			h.mu.Lock()
			h.progress = append(h.progress, p)
			h.mu.Unlock()
		},
	}
	if tt, ok := t.(*testing.T); ok {
		done := &atomic.Bool{}
		tt.Cleanup(func() { done.Store(true) })
		h.Engine.Logger = hclog.New(&hclog.LoggerOptions{Name: "engine", Level: hclog.Debug,
			Output: testWriter{t: tt, done: done}, DisableTime: true})
	}
	return h
}

// testWriter sends engine logs to t.Log until the test's cleanup starts
// (a t.Log after the test ended would panic).
type testWriter struct {
	t    *testing.T
	done *atomic.Bool
}

func (w testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (h *Harness) nextOpID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opN++
	return fmt.Sprintf("op-%d", h.opN)
}

// Progress returns the progress events the engine emitted.
func (h *Harness) Progress() []engine.ProgressEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]engine.ProgressEvent(nil), h.progress...)
}

// Withdrawals returns the "app/service" of every withdrawal attempt, in
// order (SPEC §3 store-backed traffic "withdrawals").
func (h *Harness) Withdrawals() []string {
	out := []string{}
	for _, e := range h.Events.Find("withdraw", "") {
		out = append(out, e.ID)
	}
	return out
}

// LastRoute returns the host ports the last accepted graph routes to for
// app/service (S17 "last route {8080:18081}" → []int{18081}).
func (h *Harness) LastRoute(app, service string) []int {
	return HostPorts(h.Traffic.Last(), app, service)
}

// Reset clears Events and the store's counters (used after seeding).
func (h *Harness) Reset() {
	h.Events.Reset()
	h.Store.ResetCounters()
}

// Ctx returns a context bounded to 10 s, cancelled at test end.
func (h *Harness) Ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	h.T.Cleanup(cancel)
	return ctx
}

// SeedServing seeds a serving app (SPEC §3 "Seeded serving app"): app
// identity; revision rev-0 with spec (also DESIRED); intent running; ACTIVE
// naming containers[service] for each service present in containers, at
// rev-0, activated by "op-seed" at T0, image/digest as the fake runtime
// resolves spec images, with binds[service] split into TCP and UDP maps
// (a port declared only as UDP goes to UDPBackendBinds); converged at
// rev-0; ownership with the single-writer flags; the containers running at
// T0 in the fake runtime with those binds; one backend claim per host
// port. Events and store counters are then reset.
func (h *Harness) SeedServing(app string, spec core.AppSpec, containers map[string]string, binds map[string]map[int]int) {
	h.T.Helper()
	ctx := context.Background()
	spec.Name = app
	must := func(err error) {
		h.T.Helper()
		if err != nil {
			h.T.Fatalf("seed %s: %v", app, err)
		}
	}
	info, err := h.Store.EnsureApp(ctx, app)
	must(err)
	must(h.Store.SaveRevision(ctx, core.Revision{ID: "rev-0", App: app, Spec: spec, CreatedAt: T0}))
	must(h.Store.SaveDesired(ctx, app, "rev-0"))
	must(h.Store.SaveIntent(ctx, app, core.Intent{Stopped: false, UpdatedBy: "op-seed", UpdatedAt: T0}))
	active := core.Active{App: app, Services: map[string]*core.ActiveService{}, Converged: true,
		ConvergedRevision: "rev-0", Networks: spec.Networks}
	own := core.Ownership{App: app, Incarnation: info.Incarnation, SingleWriter: map[string]bool{}}
	var claims []core.Claim
	for _, s := range spec.Services {
		id, ok := containers[s.Name]
		if !ok {
			continue
		}
		ref := ImageRefFor(s.Image)
		if im, ok := h.Runtime.Images[s.Image]; ok {
			ref = im
		}
		tcp, udp := splitBinds(s, binds[s.Name])
		active.Services[s.Name] = &core.ActiveService{
			EffectiveRevision: "rev-0", ActivatedBy: "op-seed", ActivatedAt: T0,
			Image: ref.Ref, Digest: ref.Digest, Container: id, Spec: s,
			BackendBinds: tcp, UDPBackendBinds: udp,
		}
		own.SingleWriter[s.Name] = s.SingleWriter()
		h.Runtime.AddContainer(id, core.ContainerState{Name: "gordon-" + app + "-" + s.Name + "-seed",
			Image: ref.Ref, Status: core.StatusRunning, StartedAt: T0,
			Labels: map[string]string{core.LabelManaged: "true", core.LabelApp: app, core.LabelService: s.Name,
				core.LabelIncarnation: info.Incarnation, core.LabelOp: "op-seed"}}, tcp)
		h.Runtime.SetUDPBinds(id, udp)
		for _, hp := range tcp {
			claims = append(claims, core.Claim{Port: hp, Protocol: "tcp", Owner: core.ClaimOwnerBackend, App: app, Container: id})
		}
		for _, hp := range udp {
			claims = append(claims, core.Claim{Port: hp, Protocol: "udp", Owner: core.ClaimOwnerBackend, App: app, Container: id})
		}
	}
	must(h.Store.SaveActive(ctx, active))
	must(h.Store.SaveOwnership(ctx, own))
	if len(claims) > 0 {
		must(h.Store.RegisterClaims(ctx, claims))
	}
	h.Reset()
}

// splitBinds splits a service's seeded binds: a port declared as UDP and
// not as TCP or HTTP is a UDP bind, everything else TCP.
func splitBinds(s core.ServiceSpec, binds map[int]int) (tcp, udp map[int]int) {
	tcpPorts := map[int]bool{}
	for _, h := range s.HTTP {
		tcpPorts[h.Port] = true
	}
	for _, t := range s.TCP {
		tcpPorts[t.Port] = true
	}
	udpPorts := map[int]bool{}
	for _, u := range s.UDP {
		udpPorts[u.Port] = true
	}
	for cp, hp := range binds {
		if udpPorts[cp] && !tcpPorts[cp] {
			if udp == nil {
				udp = map[int]int{}
			}
			udp[cp] = hp
		} else {
			if tcp == nil {
				tcp = map[int]int{}
			}
			tcp[cp] = hp
		}
	}
	return tcp, udp
}

// SeedMarker saves a marker (CreatedAt T0 when zero) and resets Events and
// counters.
func (h *Harness) SeedMarker(m core.Marker) {
	h.T.Helper()
	if m.CreatedAt.IsZero() {
		m.CreatedAt = T0
	}
	if err := h.Store.SaveMarker(context.Background(), m); err != nil {
		h.T.Fatalf("seed marker: %v", err)
	}
	h.Reset()
}

// SeedOp claims op as the app's latest (StartedAt T0 when zero) and resets
// Events and counters.
func (h *Harness) SeedOp(op core.Operation) {
	h.T.Helper()
	if op.StartedAt.IsZero() {
		op.StartedAt = T0
	}
	if _, claimed, err := h.Store.ClaimOp(context.Background(), op); err != nil || !claimed {
		h.T.Fatalf("seed op %s: claimed=%t err=%v", op.ID, claimed, err)
	}
	h.Reset()
}

// WebSpec is SPEC §3's "stateless web spec": public HTTP blog.example.com
// on 8080, declared HTTP readiness /healthz with a 1 s budget, image
// "registry.example/blog:1.4", the given stop grace (0 = default).
func WebSpec(grace time.Duration) core.ServiceSpec {
	return core.ServiceSpec{
		Name:      "web",
		Image:     "registry.example/blog:1.4",
		StopGrace: core.Duration(grace),
		HTTP:      []core.HTTPInterface{{Port: 8080, Host: "blog.example.com", Visibility: core.VisibilityPublic}},
		Readiness: core.Readiness{Type: core.ReadinessHTTP, Path: "/healthz", Port: 8080, Timeout: core.Duration(time.Second)},
	}
}

// BlogApp is app "blog" with the given services.
func BlogApp(services ...core.ServiceSpec) core.AppSpec {
	return core.AppSpec{Name: "blog", Services: services}
}
