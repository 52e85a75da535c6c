package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/readycheck"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// AppStatus is what `docker gordon status` shows for one app.
type AppStatus struct {
	App         string `json:"app"`
	Incarnation string `json:"incarnation,omitempty"`
	Stopped     bool   `json:"stopped"`
	// Desired is the latest revision id (DESIRED).
	Desired string `json:"desired,omitempty"`
	// DesiredUnclaimed is true when no operation ever claimed Desired and
	// no service runs it: the revision was stored but its deploy stopped
	// before the claim (a full state disk, a crash), so nothing ran for it.
	// LastOp is then about an earlier revision.
	DesiredUnclaimed bool            `json:"desired_unclaimed,omitempty"`
	Services         []ServiceStatus `json:"services"`
	// Markers are every recovery inhibition marker of the app.
	Markers []core.Marker `json:"markers,omitempty"`
	// LastOp is the latest operation's id, kind and outcome ("" = running).
	LastOp *OpSummary `json:"last_op,omitempty"`
	// State is the app as a whole (see AppState*): running only when every
	// ACTIVE service's container runs; degraded names what does not in
	// Problems; not-deployed when nothing was ever published (also after a
	// failed first deploy); unreadable when a record could not be read.
	State string `json:"state"`
	// Problems are one line per service that is not serving, or the
	// unreadable record's error.
	Problems []string `json:"problems,omitempty"`
	// Maintenance is the app's maintenance record (SPEC R75; nil: not in
	// maintenance).
	Maintenance *routetable.Maintenance `json:"maintenance,omitempty"`
}

// App states of AppStatus.State.
const (
	AppStateRunning = "running"
	// AppStateAsleep: every service with a container sleeps (SPEC R81).
	AppStateAsleep      = "asleep"
	AppStateStopped     = "stopped"
	AppStateDegraded    = "degraded"
	AppStateNotDeployed = "not-deployed"
	AppStateUnreadable  = "unreadable"
	AppStateUnknown     = "unknown"
)

// OpSummary is an operation without its steps.
type OpSummary struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Verb is the verb that ran the op when it differs from Kind
	// ("rollback" for a rollback's deploy); "" otherwise.
	Verb string `json:"verb,omitempty"`
	// Revision is the revision a deploy claimed ("" for other kinds).
	Revision  string       `json:"revision,omitempty"`
	Outcome   core.Outcome `json:"outcome"`
	StartedAt time.Time    `json:"started_at"`
}

// ServiceStatus is one service's serving generation as ACTIVE records it,
// plus the runtime's view of its container.
type ServiceStatus struct {
	Service   string `json:"service"`
	Container string `json:"container"`
	Image     string `json:"image"`
	Digest    string `json:"digest"`
	Revision  string `json:"revision"`
	// State is the runtime status (running, exited, …), "missing" when the
	// container is gone, "unknown" when the runtime could not be asked.
	State           string      `json:"state"`
	StartedAt       time.Time   `json:"started_at,omitempty"`
	BackendBinds    map[int]int `json:"backend_binds,omitempty"`
	UDPBackendBinds map[int]int `json:"udp_backend_binds,omitempty"`
	// IP and Network: the container's address the binds are dialled at
	// ("" = 127.0.0.1, the loopback fallback; SPEC R18).
	IP      string `json:"ip,omitempty"`
	Network string `json:"network,omitempty"`
	// Routes are the public hosts and published L4 addresses.
	Routes []string `json:"routes,omitempty"`
	// SingleWriter marks services that must never overlap (restart_unsafe).
	SingleWriter bool `json:"single_writer"`
	// Markers are the reasons of markers on this service's containers.
	Markers []string `json:"markers,omitempty"`
	// Health is Docker's health status ("", starting, healthy, unhealthy).
	Health string `json:"health,omitempty"`
	// Node is the swarm node the serving instance runs on ("" on one
	// engine).
	Node string `json:"node,omitempty"`
	// Readiness is the check a new container of the service passes before
	// it is routed (deploy, restart), and where it comes from (R29).
	Readiness readycheck.Check `json:"readiness"`
	// LastRecovery is the periodic pass's last recovery of this service's
	// serving container (why it was withdrawn and restarted), if any.
	LastRecovery *core.RecoveryEvent `json:"last_recovery,omitempty"`
	// Instances lists every instance of the generation (the primary, which
	// the fields above describe, first) when the service runs more than
	// one; empty for one instance.
	Instances []InstanceStatus `json:"instances,omitempty"`
	// Declared is how many instances the service's spec asks for (1 or
	// more); Serving is how many of its recorded instances run. Serving <
	// Declared (a stopped app aside) makes the app degraded, and Problems
	// says why: an instance that is not running, or fewer instances
	// recorded than declared.
	Declared int `json:"declared"`
	Serving  int `json:"serving"`
	// AsleepSince is set while the service sleeps (SPEC R81; State is
	// then "asleep").
	AsleepSince *time.Time `json:"asleep_since,omitempty"`
}

// InstanceStatus is one instance of a service's generation: its container,
// the runtime's view of it, and the endpoints the edge reaches it at
// (IP:port for each bind; "" IP = 127.0.0.1, SPEC R18).
type InstanceStatus struct {
	Container       string      `json:"container"`
	State           string      `json:"state"`
	Health          string      `json:"health,omitempty"`
	StartedAt       time.Time   `json:"started_at,omitempty"`
	BackendBinds    map[int]int `json:"backend_binds,omitempty"`
	UDPBackendBinds map[int]int `json:"udp_backend_binds,omitempty"`
	IP              string      `json:"ip,omitempty"`
	Network         string      `json:"network,omitempty"`
	// Node is the swarm node the instance runs on ("" on one engine).
	Node string `json:"node,omitempty"`
}

// Status reads one app's state (no lock: readers never need one). A nil
// Runtime leaves State "unknown". Unknown app → error wrapping ErrNotFound.
func (e *Engine) Status(ctx context.Context, app string) (st AppStatus, err error) {
	st = AppStatus{App: app}
	info, err := e.Store.LoadApp(ctx, app)
	if err != nil {
		if !errors.Is(err, core.ErrNotFound) {
			st.State, st.Problems = AppStateUnreadable, []string{err.Error()}
		}
		return st, err
	}
	st.Incarnation = info.Incarnation
	intent, err := e.Store.LoadIntent(ctx, app)
	if err != nil {
		return st, err
	}
	st.Stopped, st.Maintenance = intent.Stopped, intent.Maintenance
	if d, err := e.Store.LoadDesired(ctx, app); err == nil {
		st.Desired = d
	} else if !errors.Is(err, core.ErrNotFound) {
		return st, err
	}
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		return st, err
	}
	st.Markers = markers
	if op, err := e.Store.LatestOp(ctx, app); err == nil {
		st.LastOp = &OpSummary{ID: op.ID, Kind: op.Kind, Verb: op.Verb, Revision: op.Revision, Outcome: op.Outcome, StartedAt: op.StartedAt}
	} else if !errors.Is(err, core.ErrNotFound) {
		return st, err
	}
	active, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		st.State = AppStateNotDeployed
		st.DesiredUnclaimed = e.desiredUnclaimed(ctx, app, st.Desired, st.LastOp, core.Active{})
		return st, nil
	}
	if err == nil {
		st.DesiredUnclaimed = e.desiredUnclaimed(ctx, app, st.Desired, st.LastOp, active)
	}
	if err != nil {
		st.State, st.Problems = AppStateUnreadable, []string{err.Error()}
		return st, err
	}
	defer func() { st.State, st.Problems = appState(st) }()
	names := slices.Sorted(maps.Keys(active.Services))
	// Status is read-only and best effort: an unreadable recovery record
	// only hides crash-loop details (the zero record), it fails nothing.
	recovery, _ := e.Store.LoadRecovery(ctx, app)
	for _, n := range names {
		a := active.Services[n]
		ss := ServiceStatus{
			Service: n, Container: a.Container, Image: a.Spec.Image, Digest: a.Digest,
			Revision: a.EffectiveRevision, State: "unknown",
			BackendBinds: a.BackendBinds, UDPBackendBinds: a.UDPBackendBinds, IP: a.IP, Network: a.Network,
			SingleWriter: a.Spec.SingleWriter(),
		}
		ss.Routes = routesOf(&a.Spec)
		for _, m := range markers {
			if m.Service == n {
				ss.Markers = append(ss.Markers, m.Reason+":"+m.Container)
			}
		}
		imageHC := false // the container's healthcheck: the manifest's, else its image's
		if e.Runtime != nil && a.Container != "" {
			cs, err := e.Runtime.InspectContainer(ctx, a.Container)
			switch {
			case errors.Is(err, core.ErrNotFound) && st.Stopped:
				ss.State = AppStateStopped // R50 retired it; start rebuilds it
			case errors.Is(err, core.ErrNotFound):
				ss.State = "missing"
			case err == nil:
				ss.State, ss.StartedAt, ss.Health, ss.Node = cs.Status, cs.StartedAt, cs.Health, cs.Node
				imageHC = cs.HasHealthcheck
			}
		}
		if a.AsleepSince != nil {
			ss.State, ss.AsleepSince = AppStateAsleep, a.AsleepSince
		}
		ss.Readiness = readycheck.Deploy(&a.Spec, imageHC)
		if len(a.Replicas) > 0 {
			ss.Instances = e.instanceStatuses(ctx, a, ss)
		}
		ss.Declared = a.Spec.Instances()
		ss.Serving = servingCount(ss)
		if ev, ok := recovery.Events[n]; ok {
			ev := ev
			ss.LastRecovery = &ev
		}
		st.Services = append(st.Services, ss)
	}
	return st, nil
}

// routesOf lists s's public hosts and published L4 addresses:
// "http://host -> :port", "tcp addr -> :port", "udp addr -> :port".
func routesOf(s *core.ServiceSpec) []string {
	var out []string
	for _, h := range s.HTTP {
		if h.Public() {
			out = append(out, fmt.Sprintf("http://%s -> :%d", h.Host, h.Port))
		}
	}
	for _, t := range s.TCP {
		if t.Publish != "" {
			out = append(out, fmt.Sprintf("tcp %s -> :%d", t.Publish, t.Port))
		}
	}
	for _, u := range s.UDP {
		if u.Publish != "" {
			out = append(out, fmt.Sprintf("udp %s -> :%d", u.Publish, u.Port))
		}
	}
	return out
}

// instanceStatuses lists a's instances: the primary as ss describes it,
// each replica as the runtime reports it ("missing" when gone, "unknown"
// without a runtime or when it cannot be asked).
func (e *Engine) instanceStatuses(ctx context.Context, a *core.ActiveService, ss ServiceStatus) []InstanceStatus {
	out := []InstanceStatus{{Container: a.Container, State: ss.State, Health: ss.Health, StartedAt: ss.StartedAt, Node: ss.Node,
		BackendBinds: a.BackendBinds, UDPBackendBinds: a.UDPBackendBinds, IP: a.IP, Network: a.Network}}
	for _, r := range a.Replicas {
		is := InstanceStatus{Container: r.Container, State: "unknown", BackendBinds: r.BackendBinds, UDPBackendBinds: r.UDPBackendBinds, IP: r.IP, Network: r.Network}
		if e.Runtime != nil {
			cs, err := e.Runtime.InspectContainer(ctx, r.Container)
			switch {
			case errors.Is(err, core.ErrNotFound):
				is.State = "missing"
			case err == nil:
				is.State, is.Health, is.StartedAt, is.Node = cs.Status, cs.Health, cs.StartedAt, cs.Node
			}
		}
		out = append(out, is)
	}
	return out
}

// servingCount is how many of ss's instances run (the primary alone
// when ss lists no instances).
func servingCount(ss ServiceStatus) int {
	if len(ss.Instances) == 0 {
		if ss.Container != "" && ss.State == core.StatusRunning {
			return 1
		}
		return 0
	}
	n := 0
	for _, in := range ss.Instances {
		if in.State == core.StatusRunning {
			n++
		}
	}
	return n
}

// appState derives AppStatus.State and Problems from the services' real
// container states (SPEC status): a stopped intent is stopped; no service
// with a container is not-deployed; any service whose container is not
// running (exited, restarting, missing, …) makes the app degraded; all
// unknown (no runtime) is unknown.
func appState(st AppStatus) (string, []string) {
	if st.Stopped {
		return AppStateStopped, nil
	}
	var problems []string
	withContainer, unknown, asleep := 0, 0, 0
	for _, s := range st.Services {
		if s.Container == "" {
			problems = append(problems, fmt.Sprintf("service %s has no container", s.Service))
			continue
		}
		withContainer++
		if s.State == AppStateAsleep {
			asleep++
			continue
		}
		switch s.State {
		case core.StatusRunning:
		case "unknown":
			unknown++
		default:
			problems = append(problems, fmt.Sprintf("service %s: container %s is %s", s.Service, readiness.ShortID(s.Container), s.State))
		}
		for _, in := range s.Instances {
			if in.Container != s.Container && in.State != core.StatusRunning && in.State != "unknown" {
				problems = append(problems, fmt.Sprintf("service %s: instance %s is %s", s.Service, readiness.ShortID(in.Container), in.State))
			}
		}
		if recorded := max(len(s.Instances), 1); recorded < s.Declared && s.State != "unknown" {
			problems = append(problems, fmt.Sprintf("service %s: %d of %d instances serve: %d declared, %d running (restore them with: docker gordon scale %s %s=%d)",
				s.Service, s.Serving, s.Declared, s.Declared, recorded, st.App, s.Service, s.Declared))
		}
	}
	switch {
	case withContainer == 0:
		return AppStateNotDeployed, problems
	case asleep == withContainer:
		return AppStateAsleep, nil
	case len(problems) > 0:
		return AppStateDegraded, problems
	case unknown > 0:
		return AppStateUnknown, nil
	}
	return AppStateRunning, nil
}

// desiredUnclaimed reports whether DESIRED names a revision that no
// operation claimed and no ACTIVE service runs (status never presents an
// earlier op as the deploy of the desired revision). Best effort: an
// unreadable journal counts as claimed.
func (e *Engine) desiredUnclaimed(ctx context.Context, app, desired string, last *OpSummary, active core.Active) bool {
	if desired == "" || (last != nil && last.Revision == desired) {
		return false
	}
	for _, s := range active.Services {
		if s != nil && s.EffectiveRevision == desired {
			return false
		}
	}
	ops, err := e.Store.ListOps(ctx, app)
	if err != nil {
		return false
	}
	for _, op := range ops {
		if op.Revision == desired {
			return false
		}
	}
	return true
}
