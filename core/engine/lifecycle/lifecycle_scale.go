package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core/engine/deploy"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// ScaleRequest is one scale (`scale APP SERVICE=N…`).
type ScaleRequest struct {
	// App is the app name (required).
	App string
	// Replicas maps service → instances wanted (1..core.MaxReplicas).
	Replicas map[string]int
	// OpKey is the deploy's idempotency key (R6).
	OpKey string
	// Pull is the pull policy (decision 15); "" = missing.
	Pull string
}

// Scale changes how many instances services run. The serving revision's
// spec, with its images pinned to the digests it runs (as Rollback pins),
// is stored as a NEW revision with the new replica counts and deployed
// with Deploy (both phases, R12): a scaled service is replaced by a whole
// new set of instances with the overlap flow (created and probed in
// parallel, one switch, the old set drained and retired), every other
// service stays unchanged (R15). So scaling is journaled as a deploy and
// drops no request either way.
//
// Errors: empty app, no count, a count out of range, or more than one
// instance of a service that must run one (single-writer, device, UDP,
// one-shot) → ErrInvalid naming why; unknown app or service → ErrNotFound;
// never deployed → ErrConflict; then whatever Deploy returns.
func (e *Engine) Scale(ctx context.Context, req ScaleRequest) (*deploy.DeployResult, error) {
	app := req.App
	if app == "" || len(req.Replicas) == 0 {
		return nil, fmt.Errorf("%w: scale: want an app and at least one SERVICE=N", core.ErrInvalid)
	}
	if err := e.RequireLiveTraffic(ctx, "scale"); err != nil {
		return nil, err
	}
	if _, err := e.Store.LoadApp(ctx, app); err != nil {
		if errors.Is(err, core.ErrNotFound) {
			return nil, fmt.Errorf("%w: scale: unknown app %q", core.ErrNotFound, app)
		}
		return nil, fmt.Errorf("scale %s: load app: %w", app, err)
	}
	active, err := e.activeOrNeverDeployed(ctx, "scale", app)
	if err != nil {
		return nil, err
	}
	revs, err := e.Store.ListRevisions(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("scale %s: list revisions: %w", app, err)
	}
	sort.SliceStable(revs, func(i, j int) bool { return revs[i].CreatedAt.Before(revs[j].CreatedAt) })
	cur := currentRevision(active, revs)
	i := slices.IndexFunc(revs, func(r core.Revision) bool { return r.ID == cur })
	if i < 0 {
		return nil, fmt.Errorf("%w: scale %s: ACTIVE revision %q is not stored", core.ErrConflict, app, cur)
	}
	ops, err := e.Store.ListOps(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("scale %s: list operations: %w", app, err)
	}
	spec := e.pinnedSpec(ctx, revs[i], ops, active)
	if err := scaleSpec(app, &spec, req.Replicas); err != nil {
		return nil, err
	}
	e.Emit(steps.ProgressEvent{App: app, Phase: steps.PhaseResolve, Detail: "scale " + cur})
	rev, err := e.SubmitRevision(ctx, spec, "")
	if err != nil {
		return nil, fmt.Errorf("scale %s: %w", app, err)
	}
	return e.Deploy(ctx, deploy.DeployRequest{App: app, Revision: rev.ID, OpKey: req.OpKey, Pull: req.Pull, Verb: core.VerbScale})
}

// scaleSpec sets the replica counts of spec's services (1 is stored as 0,
// the default), checking each as the manifest does.
func scaleSpec(app string, spec *core.AppSpec, replicas map[string]int) error {
	for _, name := range slices.Sorted(maps.Keys(replicas)) {
		n := replicas[name]
		s, ok := spec.Service(name)
		if !ok {
			var names []string
			for _, s := range spec.Services {
				names = append(names, s.Name)
			}
			return fmt.Errorf("%w: scale %s: no service %q (services: %s)", core.ErrNotFound, app, name, strings.Join(names, ", "))
		}
		switch {
		case n < 1 || n > core.MaxReplicas:
			return fmt.Errorf("%w: scale %s: %s=%d: want 1..%d instances (stop the app to run none)", core.ErrInvalid, app, name, n, core.MaxReplicas)
		case n > 1 && s.Run == core.RunOnce:
			return fmt.Errorf("%w: scale %s: %s is a one-shot (run = \"once\"): it runs one instance to completion", core.ErrInvalid, app, name)
		case n > 1 && core.NotOverlapEligible(s) != "":
			return fmt.Errorf("%w: scale %s: %s runs one instance (%s): two instances would share state or an exclusive resource, and a UDP session must stay on one instance", core.ErrInvalid, app, name, core.NotOverlapEligible(s))
		}
		s.Replicas = n
		if n == 1 {
			s.Replicas = 0
		}
	}
	return nil
}
