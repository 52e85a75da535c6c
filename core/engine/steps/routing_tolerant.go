package steps

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// loadActivesTolerant loads the ACTIVE record of every app (apps without one
// are skipped). An app whose record cannot be read does not stop the
// others: it is returned in unreadable (app → error). Only failing to list
// the apps is an error.
func (e *Engine) LoadActivesTolerant(ctx context.Context) (actives []core.Active, unreadable map[string]error, err error) {
	apps, err := e.Store.ListApps(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("rebuild traffic: list apps: %w", err)
	}
	for _, app := range apps {
		a, err := e.Store.LoadActive(ctx, app)
		if errors.Is(err, core.ErrNotFound) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, fmt.Errorf("rebuild traffic: app %s: load ACTIVE: %w", app, err)
			}
			if unreadable == nil {
				unreadable = map[string]error{}
			}
			unreadable[app] = err
			continue
		}
		actives = append(actives, a)
	}
	return actives, unreadable, nil
}

// keptRoutes returns the routes the traffic backend last applied for the
// apps in unreadable (their last good routes). Errors: the backend cannot
// report its routes (TrafficRoutes missing or failing): the rebuild must
// then fail rather than drop those apps' routes.
func (e *Engine) keptRoutes(ctx context.Context, unreadable map[string]error) (routetable.Graph, error) {
	var kept routetable.Graph
	tr, ok := e.Traffic.(core.TrafficRoutes)
	if !ok {
		return kept, fmt.Errorf("%w: the traffic backend cannot report the routes it serves", core.ErrUnavailable)
	}
	last, err := tr.Routes(ctx)
	if err != nil {
		return kept, err
	}
	for _, r := range last.HTTP {
		if _, bad := unreadable[r.App]; bad {
			kept.HTTP = append(kept.HTTP, r)
		}
	}
	for _, r := range last.TCP {
		if _, bad := unreadable[r.App]; bad {
			kept.TCP = append(kept.TCP, r)
		}
	}
	for _, r := range last.UDP {
		if _, bad := unreadable[r.App]; bad {
			kept.UDP = append(kept.UDP, r)
		}
	}
	return kept, nil
}

// mergeKept adds kept routes to g (sorted as BuildGraph sorts).
func MergeKept(g, kept routetable.Graph) routetable.Graph {
	g.HTTP = append(g.HTTP, kept.HTTP...)
	g.TCP = append(g.TCP, kept.TCP...)
	g.UDP = append(g.UDP, kept.UDP...)
	return sortGraph(g)
}

// noteUnreadable records the apps the latest rebuild could not read (and
// forgets those it read again); see UnreadableApps.
func (e *Engine) noteUnreadable(read []core.Active, unreadable map[string]error) {
	e.unreadMu.Lock()
	defer e.unreadMu.Unlock()
	if e.unreadable == nil {
		e.unreadable = map[string]string{}
	}
	for _, a := range read {
		delete(e.unreadable, a.App)
	}
	for app, err := range unreadable {
		e.unreadable[app] = err.Error()
		e.Log().Warn("app record unreadable: its last good routes are kept", "app", app, "error", err)
	}
}

// UnreadableApps returns the apps whose ACTIVE record a rebuild of this
// engine could not read (app → error): their last good routes were kept
// while every other app was routed. The CLI reports them after the verb.
func (e *Engine) UnreadableApps() map[string]string {
	e.unreadMu.Lock()
	defer e.unreadMu.Unlock()
	out := make(map[string]string, len(e.unreadable))
	for k, v := range e.unreadable {
		out[k] = v
	}
	return out
}

// unreadableNames lists the apps of unreadable, sorted, for messages.
func unreadableNames(unreadable map[string]error) string {
	names := make([]string, 0, len(unreadable))
	for a := range unreadable {
		names = append(names, a)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// firstErr is the error of the first app of unreadable in name order.
func firstErr(unreadable map[string]error) error {
	names := strings.Split(unreadableNames(unreadable), ", ")
	return unreadable[names[0]]
}
