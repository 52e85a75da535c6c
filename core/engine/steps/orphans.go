package steps

import (
	"context"
	"errors"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
)

// knownHere reports whether this state directory holds a record of app:
// its incarnation (app.json), or an op that has not ended (a remove cut
// short after its incarnation ended). An engine can carry apps of several
// state directories (two users, a CI runner and a laptop, tests): an app
// not known here is never locked, reconciled or cleaned up from here, so
// no pass removes containers another state directory owns (R39).
//
// ended is true when the app is not known but this state directory holds
// its history: its last op ended with the incarnation (a finished remove,
// also one whose CLI died right after the op's last write). Such an app is
// not touched either; a one-shot reconcile of it succeeds with nothing to
// do, where one of an app never seen here fails (R39).
func (e *Engine) KnownHere(ctx context.Context, app string) (known, ended bool, err error) {
	_, err = e.Store.LoadApp(ctx, app)
	if err == nil {
		return true, false, nil
	}
	if !errors.Is(err, core.ErrNotFound) {
		return false, false, fmt.Errorf("app %s: load app: %w", app, err)
	}
	op, err := e.Store.LatestOp(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("app %s: load latest op: %w", app, err)
	}
	return !op.Terminal(), op.Terminal(), nil
}

// ownedContainers is the set of containers some record of app owns: every
// instance ACTIVE names (the primary and each replica, R69), the ones a
// marker names (any reason), and the Before, After and replica candidates
// of every step of the latest op while it is not terminal.
func (e *Engine) ownedContainers(ctx context.Context, app string) (map[string]bool, error) {
	owned := map[string]bool{}
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, fmt.Errorf("load ACTIVE: %w", err)
	}
	for _, s := range active.Services {
		if s == nil {
			continue
		}
		owned[s.Container] = true
		for _, in := range s.Replicas {
			owned[in.Container] = true
		}
	}
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("load markers: %w", err)
	}
	for _, m := range markers {
		owned[m.Container] = true
	}
	op, err := e.Store.LatestOp(ctx, app)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, fmt.Errorf("load latest op: %w", err)
	}
	if err == nil && !op.Terminal() {
		for _, s := range op.Steps {
			owned[s.Before], owned[s.After] = true, true
			for _, id := range s.Replicas {
				owned[id] = true
			}
		}
	}
	delete(owned, "")
	return owned, nil
}

// removeUnowned force-removes (R24) every workload container labelled for
// app and for this state directory's incarnation of it that no record owns
// (ownedContainers): a candidate a crash left between its creation and its
// journal entry, or one a finalized journal no longer names. A container
// of another incarnation (the same app name deployed from another state
// directory, or a leftover of an incarnation that ended) is never
// removed from here: it is not provably ours. Callers hold the app lock, so no flow of the app is
// creating a container meanwhile. It returns the removed IDs; an error
// names every container not confirmed gone.
func (e *Engine) RemoveUnowned(ctx context.Context, app string) ([]string, error) {
	cs, err := e.UnownedContainers(ctx, app)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, c := range cs {
		svc := c.Labels[core.LabelService]
		e.Log().Warn("removing container no record owns", "app", app, "service", svc, "container", c.ID, "status", c.Status)
		res := e.Retire(ctx, app, c.ID, RetireOptions{Service: svc, Force: true})
		if !res.Gone {
			errs = append(errs, fmt.Errorf("app %s: container %s (service %s) no record owns could not be removed: %w", app, c.ID, svc, res.Err(c.ID)))
			continue
		}
		removed = append(removed, c.ID)
	}
	return removed, errors.Join(errs...)
}

// UnownedContainers lists the workload containers labelled for app and
// for this state directory's incarnation of it that no record owns
// (ownedContainers); none when the app has no incarnation here. Callers
// hold the app lock for the answer to stay true.
func (e *Engine) UnownedContainers(ctx context.Context, app string) ([]core.ContainerState, error) {
	owned, err := e.ownedContainers(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("app %s: unowned containers: %w", app, err)
	}
	info, err := e.Store.LoadApp(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		return nil, nil // no incarnation here: nothing is provably ours
	}
	if err != nil {
		return nil, fmt.Errorf("app %s: unowned containers: load app: %w", app, err)
	}
	cs, err := e.Runtime.ListManaged(ctx, map[string]string{core.LabelApp: app, core.LabelRole: "workload", core.LabelIncarnation: info.Incarnation})
	if err != nil {
		return nil, fmt.Errorf("app %s: list containers: %w", app, err)
	}
	var out []core.ContainerState
	for _, c := range cs {
		if c.ID != "" && !owned[c.ID] {
			out = append(out, c)
		}
	}
	return out, nil
}
