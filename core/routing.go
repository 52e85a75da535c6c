package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/routetable"
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
//     Service, Backends: [{Addr: "127.0.0.1:<BackendBinds[port]>", Container}]};
//   - each TCP interface with Publish becomes an L4Route{Listen: Publish,
//     Backend: "127.0.0.1:<BackendBinds[port]>"};
//   - each UDP interface with Publish likewise from UDPBackendBinds.
//
// An interface whose port has no recorded bind is skipped (never routed:
// R52 "an unverified persisted port is never routed" is the caller's job,
// a missing bind is this function's). Lists are never nil and are sorted by
// host (HTTP) or listen address (TCP, UDP), then app, then service.
func BuildGraph(actives []Active) routetable.Graph {
	g := routetable.Graph{HTTP: []routetable.HTTPRoute{}, TCP: []routetable.L4Route{}, UDP: []routetable.L4Route{}}
	for _, a := range actives {
		for name, s := range a.Services {
			if s == nil || s.Container == "" {
				continue
			}
			for _, h := range s.Spec.HTTP {
				if !h.Public() || h.Host == "" {
					continue
				}
				hp, ok := s.BackendBinds[h.Port]
				if !ok || hp == 0 {
					continue
				}
				g.HTTP = append(g.HTTP, routetable.HTTPRoute{
					Host: h.Host, App: a.App, Service: name, TLS: h.TLS, Protocol: h.Protocol,
					Backends: []routetable.Backend{{Addr: LoopbackAddr(hp), Container: s.Container}},
				})
			}
			for _, t := range s.Spec.TCP {
				hp, ok := s.BackendBinds[t.Port]
				if t.Publish == "" || !ok || hp == 0 {
					continue
				}
				g.TCP = append(g.TCP, routetable.L4Route{Listen: t.Publish, App: a.App, Service: name,
					Backend: LoopbackAddr(hp), Container: s.Container})
			}
			for _, u := range s.Spec.UDP {
				hp, ok := s.UDPBackendBinds[u.Port]
				if u.Publish == "" || !ok || hp == 0 {
					continue
				}
				g.UDP = append(g.UDP, routetable.L4Route{Listen: u.Publish, App: a.App, Service: name,
					Backend: LoopbackAddr(hp), Container: s.Container})
			}
		}
	}
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

// LoopbackAddr returns "127.0.0.1:<port>", the only address a backend is
// ever reached on (R30).
func LoopbackAddr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// effect reports an engine-internal effect to OnEffect (tests).
func (e *Engine) effect(kind, id, detail string) {
	if e.OnEffect != nil {
		e.OnEffect(kind, id, detail)
	}
}

// loadAllActives loads the ACTIVE record of every app (apps without one are
// skipped).
func (e *Engine) loadAllActives(ctx context.Context) ([]Active, error) {
	apps, err := e.Store.ListApps(ctx)
	if err != nil {
		return nil, fmt.Errorf("rebuild traffic: list apps: %w", err)
	}
	var out []Active
	for _, app := range apps {
		a, err := e.Store.LoadActive(ctx, app)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("rebuild traffic: app %s: load ACTIVE: %w", app, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// rebuild ("route traffic", SPEC 1.1, decision 11) recomputes the whole
// graph from every app's ACTIVE record and applies it. An error is a
// rejected rebuild; it wraps the traffic backend's error (ErrUnavailable
// when that carries no class). Without a Traffic backend it does nothing.
func (e *Engine) rebuild(ctx context.Context) error {
	if e.Traffic == nil {
		return nil
	}
	actives, err := e.loadAllActives(ctx)
	if err != nil {
		return err
	}
	g := BuildGraph(actives)
	gen, err := e.Traffic.Apply(ctx, g)
	if err != nil {
		return fmt.Errorf("rebuild traffic: %w", classifyErr(err, ErrUnavailable))
	}
	e.log().Debug("traffic applied", "generation", gen, "http", len(g.HTTP), "tcp", len(g.TCP), "udp", len(g.UDP))
	return nil
}

// classifyErr returns err unchanged when it wraps one of the core error
// classes, else err wrapped with class.
func classifyErr(err error, class error) error {
	for _, c := range []error{ErrNotFound, ErrConflict, ErrInvalid, ErrUnavailable, ErrPluginExited} {
		if errors.Is(err, c) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", class, err)
}

// withdrawState drops the service's TCP and UDP backend binds from ACTIVE
// durably without applying routing (SPEC 1.1 "withdraw-state"). A missing
// ACTIVE record or service, or binds already empty, changes nothing.
func (e *Engine) withdrawState(ctx context.Context, app, service string) error {
	a, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("app %s service %s: withdraw: load ACTIVE: %w", app, service, err)
	}
	s := a.Services[service]
	if s == nil || (len(s.BackendBinds) == 0 && len(s.UDPBackendBinds) == 0) {
		return nil
	}
	s.BackendBinds, s.UDPBackendBinds = nil, nil
	if err := e.Store.SaveActive(ctx, a); err != nil {
		return fmt.Errorf("app %s service %s: withdraw: save ACTIVE: %w", app, service, err)
	}
	return nil
}

// withdraw removes a service from routing (SPEC 1.1 "withdraw", decision
// 11): durably drop its binds from ACTIVE, then rebuild. Success clears a
// pending withdrawal of the service; failure records one in the app's
// Recovery (decision 3, "publication inhibition") and returns an error
// meaning "not confirmed" (the binds may already be gone from ACTIVE). It
// reports the effect "withdraw" with id "app/service" to OnEffect.
func (e *Engine) withdraw(ctx context.Context, app, service string) error {
	e.effect("withdraw", app+"/"+service, "")
	e.progress(ProgressEvent{App: app, Service: service, Phase: "withdraw"})
	err := e.withdrawState(ctx, app, service)
	if err == nil {
		if err = e.rebuild(ctx); err != nil {
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
		e.log().Warn("clear pending withdrawal", "app", app, "service", service, "error", perr)
	}
	return nil
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
func (e *Engine) hasPendingWithdrawal(ctx context.Context, app, service string) (bool, error) {
	rec, err := e.Store.LoadRecovery(ctx, app)
	if err != nil {
		return false, fmt.Errorf("app %s service %s: load recovery: %w", app, service, err)
	}
	return rec.PendingWithdrawals[service], nil
}

// retryPendingWithdrawals re-withdraws every service of app with a pending
// withdrawal (in name order), or only those of services when given (R18.2,
// R21b, R41.3). The first failure aborts and is returned.
func (e *Engine) retryPendingWithdrawals(ctx context.Context, app string, services ...string) error {
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
		if err := e.withdraw(ctx, app, s); err != nil {
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
func (e *Engine) drainLimit(grace time.Duration) time.Duration {
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
func (e *Engine) waitDrained(ctx context.Context, addr string, limit time.Duration) (time.Duration, error) {
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
			e.log().Warn("drain limit reached", "backend", addr, "limit", limit, "in_flight", last, "status_error", err)
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
