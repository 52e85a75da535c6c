package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/depgraph"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// ScaleToZero is the watcher's part of scale to zero on one engine (SPEC
// R81): it puts services to sleep once the edge has seen no request or
// connection reach them for their sleep_after, and wakes the services
// the edge asks for (a request or a connection arrived while they slept).
// It reaches the edge serving StateDir through its admin address and
// token (GET /activity, GET /wakes).
type ScaleToZero struct {
	StateDir string
	Store    core.Store
	// Sleep and Wake run the engine's journaled sleep and wake of app's
	// services (each takes the app lock; a busy app waits).
	Sleep, Wake func(ctx context.Context, app string, services []string, reason string) error
	Log         hclog.Logger
	// Tick is how often idleness is checked (0: 1 s).
	Tick time.Duration
	// Client reaches the edge (nil: a client without timeout; each call
	// bounds itself).
	Client *http.Client
}

// Sleeper is the part of the engine ScaleToZero drives.
type Sleeper interface {
	Sleep(ctx context.Context, req engine.SleepRequest) (*engine.OpResult, error)
	Wake(ctx context.Context, req engine.SleepRequest) (*engine.OpResult, error)
}

// WatchScaleToZero runs a ScaleToZero over eng and store until ctx ends:
// the one-engine watcher's (`reconcile --watch`).
func WatchScaleToZero(ctx context.Context, stateDir string, store core.Store, eng Sleeper, log hclog.Logger) {
	call := func(f func(context.Context, engine.SleepRequest) (*engine.OpResult, error)) func(context.Context, string, []string, string) error {
		return func(ctx context.Context, app string, services []string, reason string) error {
			_, err := f(ctx, engine.SleepRequest{App: app, Services: services, Reason: reason})
			return err
		}
	}
	z := &ScaleToZero{StateDir: stateDir, Store: store, Sleep: call(eng.Sleep), Wake: call(eng.Wake), Log: log}
	z.Run(ctx)
}

// Run serves wakes and checks idleness until ctx ends.
func (z *ScaleToZero) Run(ctx context.Context) {
	if z.Client == nil {
		z.Client = &http.Client{}
	}
	if z.Log == nil {
		z.Log = hclog.NewNullLogger()
	}
	go z.serveWakes(ctx)
	tick := z.Tick
	if tick <= 0 {
		tick = time.Second
	}
	started := time.Now()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			z.sleepIdle(ctx, started)
		}
	}
}

// serveWakes long-polls the edge's GET /wakes and wakes each service it
// names, each app at once in its own goroutine (the app lock orders a
// wake after a sleep in progress; a second wake of an awake app does
// nothing). An unreachable edge is retried every second.
func (z *ScaleToZero) serveWakes(ctx context.Context) {
	for ctx.Err() == nil {
		var reqs []edgestate.WakeRequest
		if err := z.adminGet(ctx, "/wakes?wait=25", 35*time.Second, &reqs); err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		byApp := map[string][]string{}
		for _, r := range reqs {
			byApp[r.App] = append(byApp[r.App], r.Service)
		}
		for app, services := range byApp {
			go func() {
				if err := z.Wake(ctx, app, services, "first request at the edge"); err != nil && ctx.Err() == nil {
					z.Log.Error("wake failed", "app", app, "services", strings.Join(services, ","), "error", err)
				}
			}()
		}
	}
}

// sleepIdle puts to sleep, app by app, the services idle for their
// sleep_after (Idle), when the edge reports its activity.
func (z *ScaleToZero) sleepIdle(ctx context.Context, started time.Time) {
	apps, err := z.Store.ListApps(ctx)
	if err != nil {
		return
	}
	var activity []edgestate.ServiceActivity
	fetched := false
	for _, app := range apps {
		a, err := z.Store.LoadActive(ctx, app)
		if err != nil || !sleeps(a) {
			continue
		}
		if in, err := z.Store.LoadIntent(ctx, app); err != nil || in.Stopped {
			continue
		}
		if !fetched {
			if err := z.adminGet(ctx, "/activity", 5*time.Second, &activity); err != nil {
				return // no activity known: nothing sleeps
			}
			fetched = true
		}
		names, why := Idle(a, activity, started, time.Now())
		if len(names) == 0 {
			continue
		}
		if err := z.Sleep(ctx, app, names, why); err != nil && ctx.Err() == nil {
			z.Log.Error("sleep failed", "app", app, "services", strings.Join(names, ","), "error", err)
		}
	}
}

// sleeps reports whether a service of a may sleep and is awake.
func sleeps(a core.Active) bool {
	for _, s := range a.Services {
		if s != nil && s.Spec.SleepAfter > 0 && s.AsleepSince == nil && s.Container != "" {
			return true
		}
	}
	return false
}

// Idle returns the services of a to put to sleep at now, and why (SPEC
// R81): a service with a sleep_after, awake, whose routes the edge serves
// and whose last activity (not before since, when the watcher began
// watching) is at least its sleep_after ago; or one without routes that
// only sleeping services depend on. A service sleeps only when every
// service that depends on it sleeps or goes to sleep with it.
func Idle(a core.Active, activity []edgestate.ServiceActivity, since, now time.Time) ([]string, string) {
	last := map[string]time.Time{}
	for _, s := range activity {
		if s.App == a.App {
			last[s.Service] = s.Last
		}
	}
	specs := make([]core.ServiceSpec, 0, len(a.Services))
	for n, s := range a.Services {
		if s != nil {
			sp := s.Spec
			sp.Name = n
			specs = append(specs, sp)
		}
	}
	order := depgraph.DependencyOrder(specs)
	slices.Reverse(order) // dependants first
	asleep := map[string]bool{}
	var out, why []string
	for _, n := range order {
		s := a.Services[n]
		if s.AsleepSince != nil {
			asleep[n] = true
			continue
		}
		if s.Spec.SleepAfter == 0 || s.Container == "" {
			continue
		}
		var dependants []string
		for m, d := range a.Services {
			if d != nil && slices.Contains(d.Spec.DependsOn, n) {
				dependants = append(dependants, m)
			}
		}
		if slices.ContainsFunc(dependants, func(d string) bool { return !asleep[d] }) {
			continue
		}
		t, routed := last[n]
		switch {
		case routed:
			idle := now.Sub(latest(t, since))
			if idle < s.Spec.SleepAfter.D() {
				continue
			}
			why = append(why, fmt.Sprintf("%s: no request for %s", n, idle.Round(time.Second)))
		case len(dependants) > 0 && !routable(s.Spec):
			why = append(why, fmt.Sprintf("%s: every service that depends on it sleeps", n))
		default:
			continue // routes not served now (held, unavailable): not idle
		}
		asleep[n] = true
		out = append(out, n)
	}
	return out, strings.Join(why, "; ")
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// routable reports whether the edge routes requests or connections to s.
func routable(s core.ServiceSpec) bool {
	for _, h := range s.HTTP {
		if h.Public() && h.Host != "" {
			return true
		}
	}
	for _, t := range s.TCP {
		if t.Publish != "" {
			return true
		}
	}
	return false
}

// adminGet GETs path on the admin address of the edge serving StateDir
// (from its status file, with its admin token) and decodes the JSON
// answer into out, within d.
func (z *ScaleToZero) adminGet(ctx context.Context, path string, d time.Duration, out any) error {
	dir := filepath.Join(z.StateDir, "edge")
	data, err := os.ReadFile(filepath.Join(dir, edgestate.StatusFile))
	if err != nil {
		return err
	}
	var st routetable.Status
	if err := json.Unmarshal(data, &st); err != nil || st.AdminAddr == "" {
		return fmt.Errorf("edge status: no admin address")
	}
	tok, err := edgestate.ReadAdminToken(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+st.AdminAddr+path, nil)
	if err != nil {
		return err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := z.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("edge admin %s: HTTP %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
