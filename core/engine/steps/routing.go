package steps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// DefaultDrainPoll is the interval between in-flight checks while draining
// (decision 16).
const DefaultDrainPoll = 50 * time.Millisecond

// MaxDrainTimeout caps the default drain wait (decision 16).
const MaxDrainTimeout = 30 * time.Second

// BuildGraph computes the whole route graph from the ACTIVE records of every
// app (SPEC decision 11, 1.1 "rebuild"). It is pure. For every service with
// a container:
//   - each public HTTP interface with a host becomes an HTTPRoute{Host, App,
//     Service, Backends: one {Addr: Instance.Addr(BackendBinds[port]),
//     Container} per instance (ActiveService.Instances, primary first),
//     ResponseHeaderTimeoutMS: its response_timeout (0: the edge's default)};
//   - each TCP interface with Publish becomes an L4Route{Listen: Publish,
//     Backend: the first instance's Addr(BackendBinds[port]),
//     Backends: every instance when there are more than one};
//   - each UDP interface with Publish likewise from UDPBackendBinds.
//
// Addr is "<IP>:<port>", the instance's address on its app network as
// read from the live container (SPEC R18), or "127.0.0.1:<host port>"
// for an instance without IP (the loopback fallback).
//
// An interface whose port has no recorded bind is skipped (never routed:
// R52 "an unverified persisted port is never routed" is the caller's job,
// a missing bind is this function's), unless the service is held (R58:
// HoldUntil set, no binds): then each public HTTP host and each published
// TCP port becomes a held route without backend, Hold{Until: HoldUntil}.
// Lists are never nil and are sorted by host (HTTP) or listen address
// (TCP, UDP), then app, then service.
func BuildGraph(actives []core.Active) routetable.Graph {
	g := routetable.Graph{HTTP: []routetable.HTTPRoute{}, TCP: []routetable.L4Route{}, UDP: []routetable.L4Route{}}
	for _, a := range actives {
		for name, s := range a.Services {
			if s != nil && s.AsleepSince != nil {
				routeAsleep(&g, a.App, name, s)
				continue
			}
			if s != nil && s.HoldUntil != nil && len(s.BackendBinds) == 0 {
				hold := &routetable.Hold{Until: s.HoldUntil.UTC()}
				for _, h := range s.Spec.HTTP {
					if h.Public() && h.Host != "" {
						g.HTTP = append(g.HTTP, routetable.HTTPRoute{Host: h.Host, App: a.App, Service: name, Hold: hold})
					}
				}
				for _, t := range s.Spec.TCP {
					if t.Publish != "" {
						g.TCP = append(g.TCP, routetable.L4Route{Listen: t.Publish, App: a.App, Service: name, Hold: hold})
					}
				}
				continue
			}
			if s == nil || s.Container == "" {
				continue
			}
			routeService(&g, a.App, name, s)
		}
	}
	return sortGraph(g)
}

// routeAsleep adds the routes of a sleeping service (SPEC R81) to g: each
// public HTTP host and each published TCP port becomes a waking route
// without backend, whose wake bound is WakeBound of the spec.
func routeAsleep(g *routetable.Graph, app, name string, s *core.ActiveService) {
	asleep := &routetable.Asleep{WakeTimeoutMS: WakeBound(&s.Spec).Milliseconds(), Ignore: s.Spec.WakeIgnore}
	for _, h := range s.Spec.HTTP {
		if h.Public() && h.Host != "" {
			g.HTTP = append(g.HTTP, routetable.HTTPRoute{Host: h.Host, App: app, Service: name, Asleep: asleep,
				TLS: h.TLS, HSTS: h.HSTS, BasicAuth: h.BasicAuth, Allow: h.Allow})
		}
	}
	for _, t := range s.Spec.TCP {
		if t.Publish != "" {
			g.TCP = append(g.TCP, routetable.L4Route{Listen: t.Publish, App: app, Service: name, Asleep: asleep})
		}
	}
}

// WakeBound is how long the edge holds a request or a connection for a
// sleeping service's wake (SPEC R81): its readiness timeout plus 10 s to
// start its containers, at most MaxHold.
func WakeBound(spec *core.ServiceSpec) time.Duration {
	return min(MaxHold, readiness.OrDefault(readiness.DeployReadiness(spec).Timeout.D(), readiness.DefaultReadinessTimeout)+10*time.Second)
}

// routeService adds the routes of one service with a container to g: each
// public HTTP host and each published TCP or UDP port with the instances
// that have a bind for its port (none: the interface is skipped).
func routeService(g *routetable.Graph, app, name string, s *core.ActiveService) {
	instances := s.Instances()
	backends := func(port int, udp bool) []routetable.Backend {
		var out []routetable.Backend
		for _, in := range instances {
			binds := in.BackendBinds
			if udp {
				binds = in.UDPBackendBinds
			}
			if hp := binds[port]; hp != 0 {
				out = append(out, routetable.Backend{Addr: in.Addr(hp), Container: in.Container})
			}
		}
		return out
	}
	for _, h := range s.Spec.HTTP {
		if !h.Public() || h.Host == "" {
			continue
		}
		bs := backends(h.Port, false)
		if len(bs) == 0 {
			continue
		}
		g.HTTP = append(g.HTTP, routetable.HTTPRoute{
			Host: h.Host, App: app, Service: name, TLS: h.TLS, Protocol: h.Protocol, HSTS: h.HSTS,
			BasicAuth: h.BasicAuth, Allow: h.Allow,
			Backends:                bs,
			ResponseHeaderTimeoutMS: h.ResponseTimeout.D().Milliseconds(),
		})
	}
	l4 := func(ifs []core.L4Interface, udp bool) []routetable.L4Route {
		var out []routetable.L4Route
		for _, t := range ifs {
			bs := backends(t.Port, udp)
			if t.Publish == "" || len(bs) == 0 {
				continue
			}
			r := routetable.L4Route{Listen: t.Publish, App: app, Service: name, Backend: bs[0].Addr, Container: bs[0].Container,
				IdleTimeoutMS: t.IdleTimeout.D().Milliseconds(), MaxConns: t.MaxConns}
			if len(bs) > 1 {
				r.Backends = bs
			}
			out = append(out, r)
		}
		return out
	}
	g.TCP = append(g.TCP, l4(s.Spec.TCP, false)...)
	g.UDP = append(g.UDP, l4(s.Spec.UDP, true)...)
}

// sortGraph orders g's routes the one way every published graph is
// ordered: HTTP by host, app, service; TCP and UDP by listen address, app,
// service, backend.
func sortGraph(g routetable.Graph) routetable.Graph {
	sort.SliceStable(g.HTTP, func(i, j int) bool {
		x, y := g.HTTP[i], g.HTTP[j]
		if x.Host != y.Host {
			return x.Host < y.Host
		}
		if x.App != y.App {
			return x.App < y.App
		}
		return x.Service < y.Service
	})
	l4 := func(rs []routetable.L4Route) func(i, j int) bool {
		return func(i, j int) bool {
			x, y := rs[i], rs[j]
			if x.Listen != y.Listen {
				return x.Listen < y.Listen
			}
			if x.App != y.App {
				return x.App < y.App
			}
			if x.Service != y.Service {
				return x.Service < y.Service
			}
			return x.Backend < y.Backend
		}
	}
	sort.SliceStable(g.TCP, l4(g.TCP))
	sort.SliceStable(g.UDP, l4(g.UDP))
	return g
}

// WithUnservedRoutes adds to g a route for each public HTTP host of the
// services in actives that g does not route, so the edge answers 503 with
// Retry-After for it, never 404 (which says the host is unknown): a
// stopped route for an app stopped names (SPEC R58), an unavailable route
// for a running app's service with no ready instance (withdrawn by
// recovery, R41). It returns g with HTTP sorted as BuildGraph sorts it.
func WithUnservedRoutes(g routetable.Graph, actives []core.Active, stopped map[string]bool) routetable.Graph {
	routed := make(map[string]bool, len(g.HTTP))
	for _, r := range g.HTTP {
		routed[r.Host] = true
	}
	added := false
	for _, a := range actives {
		for _, name := range ActiveServiceNames(a) {
			s := a.Services[name]
			if s == nil {
				continue
			}
			for _, h := range s.Spec.HTTP {
				if !h.Public() || h.Host == "" || routed[h.Host] {
					continue
				}
				routed[h.Host] = true
				g.HTTP = append(g.HTTP, routetable.HTTPRoute{Host: h.Host, App: a.App, Service: name, Stopped: stopped[a.App], Unavailable: !stopped[a.App]})
				added = true
			}
		}
	}
	if added {
		sort.SliceStable(g.HTTP, func(i, j int) bool {
			x, y := g.HTTP[i], g.HTTP[j]
			if x.Host != y.Host {
				return x.Host < y.Host
			}
			if x.App != y.App {
				return x.App < y.App
			}
			return x.Service < y.Service
		})
	}
	return g
}

// stoppedNotAsleep turns the waking routes of stopped apps into stopped
// routes (HTTP) or drops them (TCP): a request never wakes a stopped app.
func stoppedNotAsleep(g routetable.Graph, stopped map[string]bool) routetable.Graph {
	for i := range g.HTTP {
		if r := &g.HTTP[i]; r.Asleep != nil && stopped[r.App] {
			r.Asleep, r.Stopped = nil, true
		}
	}
	g.TCP = slices.DeleteFunc(g.TCP, func(r routetable.L4Route) bool { return r.Asleep != nil && stopped[r.App] })
	return g
}

// effect reports an engine-internal effect to OnEffect (tests).
func (e *Engine) effect(kind, id, detail string) {
	if e.OnEffect != nil {
		e.OnEffect(kind, id, detail)
	}
}

// rebuild ("route traffic", SPEC 1.1, decision 11) recomputes the whole
// graph from every app's ACTIVE record and applies it. An error is a
// rejected rebuild; it wraps the traffic backend's error (ErrUnavailable
// when that carries no class). Without a Traffic backend it does nothing.
func (e *Engine) Rebuild(ctx context.Context) error {
	if e.Traffic == nil {
		return nil
	}
	// One app's unreadable record does not stop every app's routing: the
	// readable apps are routed, the unreadable one keeps its last good
	// routes (reported through UnreadableApps).
	actives, unreadable, err := e.LoadActivesTolerant(ctx)
	if err != nil {
		return err
	}
	g := BuildGraph(actives)
	stopped := map[string]bool{}
	maint := map[string]*routetable.Maintenance{}
	for _, a := range actives {
		in, err := e.Store.LoadIntent(ctx, a.App)
		if err != nil {
			return fmt.Errorf("rebuild traffic: app %s: load intent: %w", a.App, err)
		}
		stopped[a.App] = in.Stopped
		if in.Maintenance != nil {
			maint[a.App] = in.Maintenance
		}
	}
	g = WithMaintenance(WithUnservedRoutes(stoppedNotAsleep(g, stopped), actives, stopped), maint)
	if len(unreadable) > 0 {
		kept, kerr := e.keptRoutes(ctx, unreadable)
		if kerr != nil {
			// The unreadable record is context (%v): the error's class is
			// that of the kept-routes failure, which decided the outcome.
			return fmt.Errorf("rebuild traffic: ACTIVE of %s unreadable (%v) and its last routes unknown: %w",
				unreadableNames(unreadable), firstErr(unreadable), kerr)
		}
		g = MergeKept(g, kept)
	}
	e.noteUnreadable(actives, unreadable)
	gen, err := e.Traffic.Apply(ctx, g)
	if err != nil {
		return fmt.Errorf("rebuild traffic: %w", core.WithClass(err, core.ErrUnavailable))
	}
	e.Log().Debug("traffic applied", "generation", gen, "http", len(g.HTTP), "tcp", len(g.TCP), "udp", len(g.UDP))
	return nil
}

// withdrawState drops the service's TCP and UDP backend binds from ACTIVE
// durably without applying routing (SPEC 1.1 "withdraw-state"). A missing
// ACTIVE record or service, or binds already empty, changes nothing.
func (e *Engine) WithdrawState(ctx context.Context, app, service string) error {
	return e.withdrawStateHold(ctx, app, service, time.Time{})
}

// withdrawStateHold is withdrawState that also marks the service held
// until hold (SPEC R58) when hold is not zero.
func (e *Engine) withdrawStateHold(ctx context.Context, app, service string, hold time.Time) error {
	a, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("app %s service %s: withdraw: load ACTIVE: %w", app, service, err)
	}
	s := a.Services[service]
	if s == nil || (!hasBinds(s) && hold.IsZero()) {
		return nil
	}
	s.BackendBinds, s.UDPBackendBinds, s.IP, s.Network = nil, nil, "", ""
	for i := range s.Replicas {
		s.Replicas[i] = core.Instance{Container: s.Replicas[i].Container}
	}
	if !hold.IsZero() {
		h := hold.UTC()
		s.HoldUntil = &h
	}
	if err := e.Store.SaveActive(ctx, a); err != nil {
		return fmt.Errorf("app %s service %s: withdraw: save ACTIVE: %w", app, service, err)
	}
	return nil
}

// hasBinds reports whether any instance of s has a bind recorded.
func hasBinds(s *core.ActiveService) bool {
	for _, in := range s.Instances() {
		if len(in.BackendBinds) > 0 || len(in.UDPBackendBinds) > 0 {
			return true
		}
	}
	return false
}

// withdraw removes a service from routing (SPEC 1.1 "withdraw", decision
// 11): durably drop its binds from ACTIVE, then rebuild. Success clears a
// pending withdrawal of the service; failure records one in the app's
// Recovery (decision 3, "publication inhibition") and returns an error
// meaning "not confirmed" (the binds may already be gone from ACTIVE). It
// reports the effect "withdraw" with id "app/service" to OnEffect.
func (e *Engine) Withdraw(ctx context.Context, app, service string) error {
	return e.WithdrawHold(ctx, app, service, time.Time{})
}

// withdrawHold is withdraw that leaves the service held until hold (SPEC
// R58) when hold is not zero: its hosts and published TCP ports stay in
// the graph as held routes. endHold ends it.
func (e *Engine) WithdrawHold(ctx context.Context, app, service string, hold time.Time) error {
	e.effect("withdraw", app+"/"+service, "")
	e.Emit(ProgressEvent{App: app, Service: service, Phase: PhaseWithdraw})
	err := e.withdrawStateHold(ctx, app, service, hold)
	if err == nil {
		if err = e.Rebuild(ctx); err != nil {
			err = fmt.Errorf("app %s service %s: withdrawal not confirmed: %w", app, service, err)
		}
	}
	if err != nil {
		if perr := e.setPendingWithdrawal(ctx, app, service, true); perr != nil {
			err = errors.Join(err, perr)
		}
		return err
	}
	if perr := e.setPendingWithdrawal(ctx, app, service, false); perr != nil {
		// The withdrawal itself is confirmed; a stale pending flag only causes
		// one more (harmless) withdrawal later.
		e.Log().Warn("clear pending withdrawal", "app", app, "service", service, "error", perr)
	}
	return nil
}

// withdrawPrimary is R41's withdrawal of a service whose primary instance
// is being recovered: when another instance of the service is routed (a
// replica with binds) and no hold is asked for, only the primary's binds
// are dropped and the replicas keep serving (a swarm node's loss takes
// one instance, not the service); otherwise the whole service is withdrawn
// (withdrawHold).
func (e *Engine) WithdrawPrimary(ctx context.Context, app, service string, hold time.Time) error {
	if hold.IsZero() {
		a, err := e.Store.LoadActive(ctx, app)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("app %s service %s: withdraw: load ACTIVE: %w", app, service, err)
		}
		if s := a.Services[service]; err == nil && s != nil && routedReplica(s) {
			if len(s.BackendBinds) == 0 && len(s.UDPBackendBinds) == 0 {
				return nil
			}
			e.effect("withdraw", app+"/"+service, s.Container)
			e.Emit(ProgressEvent{App: app, Service: service, Phase: PhaseWithdraw, Detail: readiness.ShortID(s.Container)})
			s.BackendBinds, s.UDPBackendBinds, s.IP, s.Network = nil, nil, "", ""
			if err := e.Store.SaveActive(ctx, a); err != nil {
				return fmt.Errorf("app %s service %s: withdraw %s: save ACTIVE: %w", app, service, readiness.ShortID(s.Container), err)
			}
			if err := e.Rebuild(ctx); err != nil {
				return fmt.Errorf("app %s service %s: withdrawal of %s not confirmed: %w", app, service, readiness.ShortID(s.Container), err)
			}
			return nil
		}
	}
	return e.WithdrawHold(ctx, app, service, hold)
}

// routedReplica reports whether an instance beside s's primary has a bind.
func routedReplica(s *core.ActiveService) bool {
	for _, r := range s.Replicas {
		if len(r.BackendBinds) > 0 || len(r.UDPBackendBinds) > 0 {
			return true
		}
	}
	return false
}

// MaxHold caps how long a service between generations is held (R58).
const MaxHold = 60 * time.Second

// holdBound is R58's hold for a sequential replacement of a service with
// spec whose predecessor stops with grace: the readiness timeout plus that
// grace, at most MaxHold.
func HoldBound(spec *core.ServiceSpec, grace time.Duration) time.Duration {
	return min(MaxHold, readiness.OrDefault(readiness.DeployReadiness(spec).Timeout.D(), readiness.DefaultReadinessTimeout)+grace)
}

// endHold ends a hold the sequential flow left after a failure (R58): the
// service's HoldUntil is cleared and the graph rebuilt, so held requests
// get 503 at once instead of at the bound. Best effort: failures are
// logged (the edge answers 503 at HoldUntil anyway, and any later
// publication replaces the record).
func (e *Engine) EndHold(ctx context.Context, app, service string) {
	a, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		e.Log().Warn("end hold: load ACTIVE", "app", app, "service", service, "error", err)
		return
	}
	s := a.Services[service]
	if s == nil || s.HoldUntil == nil {
		return
	}
	s.HoldUntil = nil
	if err := e.Store.SaveActive(ctx, a); err != nil {
		e.Log().Warn("end hold: save ACTIVE", "app", app, "service", service, "error", err)
		return
	}
	if err := e.Rebuild(ctx); err != nil {
		e.Log().Warn("end hold: rebuild", "app", app, "service", service, "error", err)
	}
}

// endHolds clears every HoldUntil of app's ACTIVE record and rebuilds when
// one was set (R58: a hold a crash left behind). Call it under the app
// lock only, when no flow of the app runs.
func (e *Engine) EndHolds(ctx context.Context, app string) error {
	a, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("app %s: end holds: load ACTIVE: %w", app, err)
	}
	changed := false
	for _, s := range a.Services {
		if s != nil && s.HoldUntil != nil {
			s.HoldUntil, changed = nil, true
		}
	}
	if !changed {
		return nil
	}
	if err := e.Store.SaveActive(ctx, a); err != nil {
		return fmt.Errorf("app %s: end holds: save ACTIVE: %w", app, err)
	}
	return e.Rebuild(ctx)
}

// setPendingWithdrawal records or clears the durable pending-withdrawal flag
// (decision 3); it writes only when the flag changes.
func (e *Engine) setPendingWithdrawal(ctx context.Context, app, service string, pending bool) error {
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return fmt.Errorf("app %s service %s: load recovery: %w", app, service, err)
	}
	if rec.PendingWithdrawals[service] == pending {
		return nil
	}
	if pending {
		if rec.PendingWithdrawals == nil {
			rec.PendingWithdrawals = map[string]bool{}
		}
		rec.PendingWithdrawals[service] = true
	} else {
		delete(rec.PendingWithdrawals, service)
	}
	if err := e.Store.SaveRecovery(ctx, app, rec); err != nil {
		return fmt.Errorf("app %s service %s: record pending withdrawal=%t: %w", app, service, pending, err)
	}
	return nil
}

// hasPendingWithdrawal reports whether the service has an unconfirmed
// withdrawal (publication inhibition, decision 3).
func (e *Engine) HasPendingWithdrawal(ctx context.Context, app, service string) (bool, error) {
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return false, fmt.Errorf("app %s service %s: load recovery: %w", app, service, err)
	}
	return rec.PendingWithdrawals[service], nil
}

// retryPendingWithdrawals re-withdraws every service of app with a pending
// withdrawal (in name order), or only those of services when given (R18.2,
// R21b, R41.3). The first failure aborts and is returned.
func (e *Engine) RetryPendingWithdrawals(ctx context.Context, app string, services ...string) error {
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return fmt.Errorf("app %s: load recovery: %w", app, err)
	}
	var todo []string
	for s, pending := range rec.PendingWithdrawals {
		if !pending {
			continue
		}
		if len(services) > 0 && !routingHas(services, s) {
			continue
		}
		todo = append(todo, s)
	}
	sort.Strings(todo)
	for _, s := range todo {
		if err := e.Withdraw(ctx, app, s); err != nil {
			return fmt.Errorf("retry pending withdrawal: %w", err)
		}
	}
	return nil
}

func routingHas(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// drainLimit is decision 16's default drain bound for a container stopped
// with grace: DrainTimeout when set, else min(grace (zero → 30 s), 30 s).
func (e *Engine) DrainLimit(grace time.Duration) time.Duration {
	if e.DrainTimeout > 0 {
		return e.DrainTimeout
	}
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	return min(grace, MaxDrainTimeout)
}

// waitDrained waits until the edge reports zero in-flight requests on addr
// ("127.0.0.1:<port>") or limit passes (decision 16), polling Traffic.Status
// every DrainPoll (default 50 ms). It returns the time waited. Reaching the
// limit, or a Status error that persists until it, is NOT an error (logged):
// retirement proceeds. Only ctx ending returns an error (ctx's). Without a
// Traffic backend, or with limit <= 0, it returns at once.
func (e *Engine) WaitDrained(ctx context.Context, addr string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	if e.Traffic == nil || limit <= 0 || addr == "" {
		return 0, nil
	}
	poll := e.DrainPoll
	if poll <= 0 {
		poll = DefaultDrainPoll
	}
	deadline := start.Add(limit)
	var last int64 = -1
	for {
		st, err := e.Traffic.Status(ctx)
		if err == nil {
			last = st.InFlight(addr)
			if last == 0 {
				return time.Since(start), nil
			}
		} else if ctx.Err() != nil {
			return time.Since(start), ctx.Err()
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			e.Log().Warn("drain limit reached", "backend", addr, "limit", limit, "in_flight", last, "status_error", err)
			return time.Since(start), nil
		}
		t := time.NewTimer(min(poll, remaining))
		select {
		case <-ctx.Done():
			t.Stop()
			return time.Since(start), ctx.Err()
		case <-t.C:
		}
	}
}

// WithMaintenance sets, on every HTTP route of an app that maint names
// (app → its maintenance record), routetable.Maintenance{Message, Allow}
// (SPEC R75). TCP and UDP routes are untouched. It returns g.
func WithMaintenance(g routetable.Graph, maint map[string]*routetable.Maintenance) routetable.Graph {
	if len(maint) == 0 {
		return g
	}
	for i := range g.HTTP {
		if m := maint[g.HTTP[i].App]; m != nil {
			g.HTTP[i].Maintenance = &routetable.Maintenance{Message: m.Message, Allow: append([]string(nil), m.Allow...)}
		}
	}
	return g
}
