package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// refreshReplicas is the periodic pass's recovery of a service's replicas
// (the instances beside the primary, which R41 recovers). Each replica is
// inspected:
//   - gone → dropped from ACTIVE, its claims released;
//   - running → its endpoints are re-read from the live container; when
//     they differ from ACTIVE's (the engine restarted it at a new address
//     or on new loopback ports) or it had none, the
//     declared readiness is checked on the new binds before they are
//     persisted;
//   - transitional (restarting, starting) → binds dropped until it runs;
//   - exited, dead, created → binds dropped and the exact container
//     started again (its binds are read by a later pass).
//
// Traffic is rebuilt once when ACTIVE changed. Errors are joined; a
// replica that fails readiness stays withdrawn.
func (e *Engine) refreshReplicas(ctx context.Context, app, name string) error {
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		return err
	}
	as := active.Services[name]
	if as == nil || len(as.Replicas) == 0 {
		return nil
	}
	var errs []error
	changed := false
	kept := as.Replicas[:0]
	for _, r := range as.Replicas {
		next, keep, err := e.refreshReplica(ctx, app, name, as, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("replica %s: %w", r.Container, err))
		}
		if !keep || !steps.InstanceEndpoints(next).Equal(steps.InstanceEndpoints(r)) {
			changed = true
		}
		if keep {
			kept = append(kept, next)
		}
	}
	if !changed {
		return errors.Join(errs...)
	}
	as.Replicas = kept
	if len(kept) == 0 {
		as.Replicas = nil
	}
	if err := e.Store.SaveActive(ctx, active); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := e.Rebuild(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// refreshReplica returns replica r as ACTIVE should record it now, and
// whether it stays in ACTIVE (see refreshReplicas).
func (e *Engine) refreshReplica(ctx context.Context, app, name string, as *core.ActiveService, r core.Instance) (core.Instance, bool, error) {
	st, err := e.Runtime.InspectContainer(ctx, r.Container)
	if errors.Is(err, core.ErrNotFound) {
		if err := e.Store.ReleaseClaims(ctx, app, r.Container); err != nil {
			return r, true, fmt.Errorf("release claims of a gone replica: %w", err)
		}
		return r, false, nil
	}
	if err != nil {
		return r, true, err
	}
	withdrawn := core.Instance{Container: r.Container}
	switch {
	case st.Running():
	case st.Status == core.StatusRestarting || st.Status == "starting":
		return withdrawn, true, nil
	default:
		if err := e.Runtime.StartContainer(ctx, r.Container); err != nil {
			return withdrawn, true, fmt.Errorf("start: %w", err)
		}
		return withdrawn, true, nil
	}
	ep, err := e.ReadBinds(ctx, app, r.Container, &as.Spec)
	if err != nil {
		return withdrawn, true, err
	}
	next := ep.Instance(r.Container)
	if ep.Equal(steps.InstanceEndpoints(r)) && (!ep.Empty() || len(as.Spec.BackendPorts()) == 0) {
		return r, true, nil
	}
	if rd := readiness.DeclaredReadiness(&as.Spec); rd.Type != "" && rd.Type != core.ReadinessNone {
		target, err := readiness.ProbeTargetFor(app, &as.Spec, rd, r.Container, st.StartedAt, ep.Binds())
		if err != nil {
			return withdrawn, true, err
		}
		target.App, target.Service = app, name
		pctx, cancel := context.WithTimeout(ctx, replicaProbeBound)
		defer cancel()
		if _, err := e.WaitReady(pctx, target, rd, nil); err != nil {
			return withdrawn, true, fmt.Errorf("readiness: %w", err)
		}
	}
	return next, true, nil
}

// replicaProbeBound bounds the readiness check of a replica whose binds
// changed, so one slow replica does not hold the pass.
const replicaProbeBound = 30 * time.Second
