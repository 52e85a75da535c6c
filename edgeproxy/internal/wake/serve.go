package wake

import (
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
)

// retryAfter is the Retry-After (seconds) of a 503 for a wake.
const retryAfter = "5"

// unavailable answers 503 with Retry-After and msg.
func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", retryAfter)
	dataplane.WriteEdgeError(w, http.StatusServiceUnavailable, msg)
}

// HoldHTTP handles a request for a sleeping service (SPEC R81). A path the
// route's wake_ignore lists is answered 503 at once and wakes nothing.
// Otherwise the request asks for the wake (once per wake: the board
// coalesces) and waits until the next snapshot is swapped in (returns
// true: route again), the wake's bound from its arrival (*until, set on
// the first call) passes or the route's queue is full (503 with
// Retry-After and a plain message), or the client goes away.
func (b *Board) HoldHTTP(w http.ResponseWriter, r *http.Request, snap *dataplane.Snapshot, rt *dataplane.HTTPRoute, until *time.Time) bool {
	name := "app " + rt.App + " service " + rt.Service
	if edgestate.WakeIgnored(rt.Asleep.Ignore, r.URL.Path) {
		unavailable(w, "gordon-edge: "+name+" is asleep, and a request for "+r.URL.Path+" does not wake it\n")
		return false
	}
	bound := edgestate.WakeTimeout(rt.Asleep.WakeTimeoutMS)
	now := time.Now()
	if until.IsZero() {
		*until = now.Add(bound)
	}
	if !now.Before(*until) {
		unavailable(w, "gordon-edge: "+name+" did not wake up within "+strconv.Itoa(int(bound.Seconds()))+" s; try again shortly\n")
		return false
	}
	if rt.Held.Add(1) > routetable.DefaultHoldQueue {
		rt.Held.Add(-1)
		unavailable(w, "gordon-edge: "+name+" is waking up and too many requests wait for it; try again shortly\n")
		return false
	}
	defer rt.Held.Add(-1)
	b.Ask(rt.App, rt.Service, bound)
	b.Held.Inc()
	defer b.Held.Dec()
	t := time.NewTimer(until.Sub(now))
	defer t.Stop()
	select {
	case <-snap.Replaced:
		return true
	case <-t.C:
		unavailable(w, "gordon-edge: "+name+" did not wake up within "+strconv.Itoa(int(bound.Seconds()))+" s; try again shortly\n")
		return false
	case <-r.Context().Done():
		return false
	}
}

// RoutedServices returns whether a service has instances routed in t.
func RoutedServices(t routetable.Table) func(app, service string) bool {
	type key struct{ app, service string }
	routed := map[key]bool{}
	for _, r := range t.HTTP {
		if len(r.Backends) > 0 {
			routed[key{r.App, r.Service}] = true
		}
	}
	for _, r := range t.TCP {
		if len(r.L4Backends()) > 0 {
			routed[key{r.App, r.Service}] = true
		}
	}
	return func(app, service string) bool { return routed[key{app, service}] }
}

// Activity remembers, per routed service, when traffic last reached it
// (SPEC R81), as GET /status reports it: sampled at each status (the
// watcher polls it every second) and at each applied table.
type Activity struct {
	mu sync.Mutex
	m  map[activityKey]*serviceActivity
}

type activityKey struct{ app, service string }

type serviceActivity struct {
	last     time.Time
	requests int64
	backends string // the routed instances, joined: a change is activity
}

// Sample returns the activity of every service snap routes to instances:
// a service is active now when its counted requests changed since the
// last sample, a request or connection is open on one of its instances,
// or its instances changed (routed again: woken, deployed, a new edge);
// a TCP listener's last accepted connection counts as well.
func (a *Activity) Sample(snap *dataplane.Snapshot, backends []routetable.BackendStatus, lastAccept func(string) time.Time) []edgestate.ServiceActivity {
	if snap == nil {
		return nil
	}
	byAddr := make(map[string]routetable.BackendStatus, len(backends))
	for _, b := range backends {
		byAddr[b.Addr] = b
	}
	cur := map[activityKey]*activitySample{}
	note := func(app, service, tag string, addrs []string) *activitySample {
		k := activityKey{app, service}
		s := cur[k]
		if s == nil {
			s = &activitySample{}
			cur[k] = s
		}
		s.backends += tag + "="
		for _, addr := range addrs {
			b := byAddr[addr]
			s.requests += b.Requests
			s.busy = s.busy || b.InFlight > 0 || b.OpenConns > 0
			s.backends += addr + ","
		}
		s.backends += ";"
		return s
	}
	routes := make([]*dataplane.HTTPRoute, 0, len(snap.Exact)+len(snap.Wildcards))
	for _, rt := range snap.Exact {
		routes = append(routes, rt)
	}
	routes = append(routes, snap.Wildcards...)
	sort.Slice(routes, func(i, j int) bool { return routes[i].Host < routes[j].Host })
	for _, rt := range routes {
		if len(rt.Backends) == 0 {
			continue
		}
		addrs := make([]string, len(rt.Backends))
		for i, b := range rt.Backends {
			addrs[i] = b.Addr
		}
		note(rt.App, rt.Service, rt.Host, addrs)
	}
	for _, r := range snap.TCP {
		var addrs []string
		for _, b := range r.L4Backends() {
			addrs = append(addrs, b.Addr)
		}
		if len(addrs) == 0 {
			continue
		}
		s := note(r.App, r.Service, r.Listen, addrs)
		if t := lastAccept(r.Listen); t.After(s.accepted) {
			s.accepted = t
		}
	}
	return a.update(cur, time.Now())
}

// activitySample is one service's counts in one sample.
type activitySample struct {
	requests int64
	busy     bool
	backends string
	accepted time.Time
}

// update folds one sample taken at now into a (services no longer routed
// are forgotten) and returns every routed service's activity, sorted.
func (a *Activity) update(cur map[activityKey]*activitySample, now time.Time) []edgestate.ServiceActivity {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[activityKey]*serviceActivity{}
	}
	out := make([]edgestate.ServiceActivity, 0, len(cur))
	for k, s := range cur {
		prev := a.m[k]
		if prev == nil || prev.requests != s.requests || prev.backends != s.backends || s.busy {
			prev = &serviceActivity{last: now, requests: s.requests, backends: s.backends}
			a.m[k] = prev
		}
		if s.accepted.After(prev.last) {
			prev.last = s.accepted
		}
		out = append(out, edgestate.ServiceActivity{App: k.app, Service: k.service, Last: prev.last.UTC()})
	}
	for k := range a.m {
		if cur[k] == nil {
			delete(a.m, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].App != out[j].App {
			return out[i].App < out[j].App
		}
		return out[i].Service < out[j].Service
	})
	return out
}
