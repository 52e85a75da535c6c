package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/engine/volsnap"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// Verbs of the restarts that take or restore a snapshot (journaled as
// Operation.Verb of a restart op, so every restart rule applies).
const (
	VerbSnapshot = "snapshot"
	VerbRestore  = "restore"
)

// dataAction is what an in-place restart does between the stop and the
// start of the service's container: take a snapshot (restore nil) or
// restore one (after a snapshot of what the volumes hold).
type dataAction struct {
	verb    string
	restore *snapshot.Manifest
	taken   []snapshot.Manifest
	errs    []string
}

// SnapshotCreate is `snapshots create APP [--service S]`: each selected
// service with volumes (all of them when req.Services is empty) is
// restarted in place (R53, journaled as a restart with verb snapshot)
// and, between its stop and its start, while the edge holds its requests
// (R58), its volumes are snapshotted (trigger manual, never removed by
// retention); then each selected service with no volume but a
// [services.X.backup] command is dumped online, with no stop (one op
// each, verb snapshot, trigger manual). It returns the snapshots taken.
// Errors: nothing to take (no volume, no command, or a named service
// with neither) is invalid and changes nothing; a failed snapshot fails
// the op, and the service serves again.
func (e *Engine) SnapshotCreate(ctx context.Context, req oprun.LifecycleRequest) (*oprun.OpResult, []snapshot.Manifest, error) {
	dumps, volumes := e.createTargets(ctx, req)
	var res *oprun.OpResult
	var taken []snapshot.Manifest
	if volumes {
		vreq := req
		if len(req.Services) > 0 {
			vreq.Services = slices.DeleteFunc(slices.Clone(req.Services), func(s string) bool { return slices.Contains(dumps, s) })
		}
		d := &dataAction{verb: VerbSnapshot}
		r, err := e.dataRestart(ctx, vreq, d)
		res, taken = r, d.taken
		if err != nil {
			return res, taken, err
		}
	}
	var errs []error
	for _, s := range dumps {
		r, m, err := e.dumpBackup(ctx, req.App, s, true)
		switch {
		case res == nil:
			res = r
		case r != nil:
			res.Services = append(res.Services, r.Services...) // one table: every service's row
		}
		if m != nil {
			taken = append(taken, *m)
		}
		if err != nil {
			errs = append(errs, err) // the other services are still dumped
		}
	}
	return res, taken, errors.Join(errs...)
}

// createTargets splits what `snapshots create` takes: the selected
// services (req.Services, else all) with no volume but a backup command
// are dumped online (dumps); volumes is whether the volume snapshot runs
// too: some selected service has a volume, or nothing can be dumped (its
// refusal then says why).
func (e *Engine) createTargets(ctx context.Context, req oprun.LifecycleRequest) (dumps []string, volumes bool) {
	active, err := e.Store.LoadActive(ctx, req.App)
	if err != nil {
		return nil, true
	}
	for _, n := range steps.ActiveServiceNames(active) {
		if len(req.Services) > 0 && !slices.Contains(req.Services, n) {
			continue
		}
		switch sp := active.Services[n].Spec; {
		case len(sp.Volumes) > 0:
			volumes = true
		case len(sp.BackupCommand) > 0:
			dumps = append(dumps, n)
		case len(req.Services) > 0:
			volumes = true // named with nothing to take: refused by the volume path
		}
	}
	for _, s := range req.Services {
		if active.Services[s] == nil {
			volumes = true // not served: refused by the volume path
		}
	}
	return dumps, volumes || len(dumps) == 0
}

// SnapshotRestore is `snapshots restore APP ID`: the snapshot's service is
// restarted in place (journaled as a restart with verb restore) and,
// between its stop and its start, while the edge holds its requests, what
// its volumes hold is snapshotted (trigger manual), then the snapshot is
// restored. A failed restore puts that data back and the service serves
// again. Errors: an unknown snapshot is not found, a service the app does
// not serve is invalid; both change nothing.
func (e *Engine) SnapshotRestore(ctx context.Context, app, id, opKey string) (*oprun.OpResult, error) {
	se := e.Engine.Engine.Engine
	if err := volsnap.CanRestore(se); err != nil {
		return nil, fmt.Errorf("snapshots restore %s: %w", app, err)
	}
	m, err := se.Snapshots.Get(app, id)
	if err != nil {
		return nil, err
	}
	if m.IsDump() {
		return nil, volsnap.DumpNotRestorable(m)
	}
	if active, err := se.Store.LoadActive(ctx, app); err == nil && active.Services[m.Service] != nil {
		if _, err := volsnap.Targets(app, m, active.Services[m.Service].Spec.Volumes); err != nil {
			return nil, fmt.Errorf("snapshots restore %s: %w", app, err)
		}
	}
	return e.dataRestart(ctx, oprun.LifecycleRequest{App: app, Services: []string{m.Service}, OpKey: opKey}, &dataAction{verb: VerbRestore, restore: &m})
}

// dataRestart is Restart of the services with volumes, with d between
// each one's stop and start.
func (e *Engine) dataRestart(ctx context.Context, req oprun.LifecycleRequest, d *dataAction) (*oprun.OpResult, error) {
	verb := map[string]string{VerbSnapshot: "snapshots create", VerbRestore: "snapshots restore"}[d.verb]
	if verb == "" {
		verb = d.verb
	}
	if e.Snapshots == nil {
		return nil, fmt.Errorf("%w: %s %s: this engine keeps no snapshots", core.ErrUnavailable, verb, req.App)
	}
	if err := e.RequireLiveTraffic(ctx, verb); err != nil {
		return nil, err
	}
	id := ""
	if d.restore != nil {
		id = d.restore.ID
	}
	req.Verb = d.verb
	fp := steps.Fingerprint(core.OpRestart, req.App, d.verb, id, steps.SortedJoin(req.Services))
	lk, res, ok, err := e.LifecyclePreamble(ctx, core.OpRestart, req, fp)
	if !ok {
		return res, err
	}
	defer lk.Unlock()
	active, err := e.activeOrNeverDeployed(ctx, verb, req.App)
	if err != nil {
		return nil, err
	}
	selected, err := withVolumes(verb, req, active)
	if err != nil {
		return nil, err
	}
	r, replay, err := e.ClaimLifecycle(ctx, core.OpRestart, req, fp, nil)
	if r == nil {
		return replay, err
	}
	r.Checks = lk.Checks
	r.Op.Verb = d.verb
	if as := active.Services[selected[0]]; as != nil {
		r.Op.Revision = as.EffectiveRevision // the revision whose data it copies
	}
	run := e.Run(r)
	run.data = d
	res, err = run.restart(ctx, selected)
	if len(d.errs) > 0 && err == nil {
		err = fmt.Errorf("%w: %s %s: %s", core.ErrConflict, verb, req.App, strings.Join(d.errs, "; "))
		r.Fail(ctx, steps.StepError, err)
		res = r.Result()
	}
	return res, err
}

// withVolumes returns the selected services (req.Services, else every
// ACTIVE one) that have volumes, in dependency order; a named service
// absent or without volumes, or none at all, is refused.
func withVolumes(verb string, req oprun.LifecycleRequest, active core.Active) ([]string, error) {
	names := steps.ActiveServiceNames(active)
	var out []string
	for _, n := range names {
		as := active.Services[n]
		named := slices.Contains(req.Services, n)
		if len(req.Services) > 0 && !named {
			continue
		}
		if len(as.Spec.Volumes) == 0 {
			if named {
				return nil, fmt.Errorf("%w: %s %s: service %s has no volume and no backup command, so there is nothing to snapshot", core.ErrInvalid, verb, req.App, n)
			}
			continue
		}
		out = append(out, n)
	}
	for _, s := range req.Services {
		if !slices.Contains(names, s) {
			return nil, fmt.Errorf("%w: %s %s: app %s serves no service %q (its services: %s)", core.ErrNotFound, verb, req.App, req.App, s, strings.Join(names, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s %s: no service of the app has a volume, so there is nothing to snapshot", core.ErrInvalid, verb, req.App)
	}
	return steps.InOrder(names, out), nil
}

// restartInPlace is the in-place restart of R53: the runtime's restart,
// or, with a data action, a stop, the data step and a start.
func (r *LifecycleRun) restartInPlace(ctx context.Context, name, id string, as *core.ActiveService) error {
	grace := steps.EffectiveGrace(as.Spec.StopGrace)
	if r.data == nil {
		return r.E.Runtime.RestartContainer(ctx, id, grace)
	}
	if err := r.E.Runtime.StopContainer(ctx, id, grace); err != nil {
		return err
	}
	if err := r.dataStep(ctx, name, id, as); err != nil {
		r.data.errs = append(r.data.errs, fmt.Sprintf("service %s: %v", name, err))
	}
	// Started again even when the verb was interrupted (Ctrl-C, SIGTERM):
	// the service must not stay stopped until a reconcile.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restartBound)
	defer cancel()
	return r.E.Runtime.StartContainer(sctx, id)
}

// restartBound bounds the start that ends an interrupted data restart.
const restartBound = 2 * time.Minute

// dataStep takes a snapshot of the stopped container's volumes, then, for
// a restore, restores the snapshot (putting the data back from the one
// just taken when that fails). Each is a journaled step.
func (r *LifecycleRun) dataStep(ctx context.Context, name, id string, as *core.ActiveService) error {
	se := r.E.Engine.Engine.Engine
	j := volsnap.Journal{Op: r.Op, Save: func() { r.Save(ctx) }}
	r.Emit(name, steps.PhaseSnapshot, id, false)
	trigger, keep := snapshot.TriggerManual, 0
	if r.data.verb == VerbBackup {
		trigger = snapshot.TriggerBackup
		_, keep = snapshot.BackupPolicy(&as.Spec)
	}
	m, _, err := volsnap.TakeStep(ctx, se, j, volsnap.Request{App: r.App, Service: name, Container: id, Volumes: as.Spec.Volumes,
		Policy: snapshot.PolicyAlways, Keep: keep, Trigger: trigger, Op: r.Op.ID, Verb: r.data.verb, Revision: as.EffectiveRevision})
	if err != nil {
		return err
	}
	if m != nil {
		r.data.taken = append(r.data.taken, *m)
	}
	if r.data.restore == nil {
		return nil
	}
	r.Emit(name, steps.PhaseRestore, r.data.restore.ID, false)
	return volsnap.RestoreStep(ctx, se, j, r.App, name, r.data.restore.ID, as.Spec.Volumes, m)
}
