package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/deploy"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// sweepLeftovers is the last part of a reconcile pass (SPEC R43, R5(9)):
// what a failed step recorded but could not finish is finished here, so no
// marker or claim outlives the container it is about. A marker (other
// than retirement-pending, which R43 retires) whose container ACTIVE does
// not name and the runtime no longer has is cleared
// (after releasing the container's claims and secret files); a claim of
// this app whose container is neither ACTIVE's nor marked and no longer
// exists is released. Containers that still exist are left to the marker
// rules. Errors are joined; the caller reports them.
func (e *Engine) sweepLeftovers(ctx context.Context, app string) error {
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return err
	}
	named := map[string]bool{}
	for _, s := range active.Services {
		for _, in := range s.Instances() {
			named[in.Container] = true
		}
	}
	gone := func(id string) bool {
		_, err := e.Runtime.InspectContainer(ctx, id)
		return errors.Is(err, core.ErrNotFound)
	}
	var errs []error
	markers, err := e.Store.LoadMarkers(ctx, app)
	if err != nil {
		return fmt.Errorf("sweep: load markers: %w", err)
	}
	marked := map[string]bool{}
	for _, m := range markers {
		// Retirement-pending markers are retirePending's (retry-on-leak,
		// R43); only the other reasons are swept here.
		if m.Reason == core.MarkerRetirementPending || named[m.Container] || !gone(m.Container) {
			marked[m.Container] = true
			continue
		}
		if err := e.Store.ReleaseClaims(ctx, app, m.Container); err != nil {
			errs = append(errs, fmt.Errorf("sweep: release claims of gone %s: %w", m.Container, err))
			continue
		}
		if err := e.Store.DeleteContainerSecrets(ctx, app, m.Container); err != nil {
			// Secret copies of a gone container serve nothing; the marker
			// is still cleared so the service is not held back by them.
			e.Log().Warn("sweep: delete secret files of gone container", "app", app, "container", m.Container, "error", err)
		}
		if err := e.Store.ClearMarker(ctx, app, m.Service, m.Container); err != nil {
			errs = append(errs, fmt.Errorf("sweep: clear %s marker of gone %s: %w", m.Reason, m.Container, err))
		}
	}
	claims, err := e.Store.ListClaims(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("sweep: list claims: %w", err))...)
	}
	released := map[string]bool{}
	for _, c := range claims {
		if c.App != app || c.Container == "" || named[c.Container] || marked[c.Container] || released[c.Container] {
			continue
		}
		if !gone(c.Container) {
			continue
		}
		released[c.Container] = true
		if err := e.Store.ReleaseClaims(ctx, app, c.Container); err != nil {
			errs = append(errs, fmt.Errorf("sweep: release claims of gone %s: %w", c.Container, err))
		}
	}
	return errors.Join(errs...)
}

// ensureRouted makes what the traffic backend serves equal what ACTIVE says
// (the end of a reconcile pass): a rebuild whose apply failed earlier (a
// verb that could not confirm its switch) is applied now. When the backend
// reports its routes and they already match, nothing is applied.
func (e *Engine) ensureRouted(ctx context.Context) error {
	if e.Traffic == nil {
		return nil
	}
	if tr, ok := e.Traffic.(core.TrafficRoutes); ok {
		actives, unreadable, err := e.LoadActivesTolerant(ctx)
		if err == nil && len(unreadable) == 0 {
			if cur, err := tr.Routes(ctx); err == nil && deploy.DpSameJSON(normGraph(cur), normGraph(steps.BuildGraph(actives))) {
				return nil
			}
		}
	}
	return e.Rebuild(ctx)
}

// normGraph sorts g and replaces nil lists by empty ones, for comparison.
func normGraph(g routetable.Graph) routetable.Graph {
	out := steps.MergeKept(routetable.Graph{HTTP: []routetable.HTTPRoute{}, TCP: []routetable.L4Route{}, UDP: []routetable.L4Route{}}, g)
	for i := range out.HTTP {
		if out.HTTP[i].Backends == nil {
			out.HTTP[i].Backends = []routetable.Backend{}
		}
	}
	return out
}

// switchedBySuccess reports whether ACTIVE's container of service was
// activated by a deploy whose step for the service succeeded with that
// container as After, or by a restart's overlap whose step names it as After (the engine probed it ready and switched to it), and
// the container's current execution began before that deploy finished
// (not a later restart, whose binds may have moved).
func (e *Engine) switchedBySuccess(ctx context.Context, app, service string, as *core.ActiveService, startedAt time.Time) bool {
	if as == nil || as.ActivatedBy == "" || as.Container == "" {
		return false
	}
	op, err := e.Store.LoadOp(ctx, app, as.ActivatedBy)
	if err != nil || op.FinishedAt.IsZero() || startedAt.After(op.FinishedAt) {
		return false
	}
	switch op.Kind {
	case core.OpDeploy:
		st := op.Step(steps.ServiceStepID(service, "replace"))
		return st != nil && st.State == core.StepSucceeded && st.After == as.Container
	case core.OpRestart:
		// A restart activates a record only for a container it probed
		// ready and switched to (its overlap, R53, or a rebuild, R54), so
		// a restart op that activated ACTIVE's record for a service it
		// restarted switched to that container, even when a crash cut the
		// op short before its step was journaled as succeeded (and
		// interrupted-op recovery left the step without its After).
		return op.Step(steps.ServiceStepID(service, "restart")) != nil
	}
	return false
}
