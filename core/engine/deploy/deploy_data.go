package deploy

import (
	"context"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/engine/volsnap"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// The data step of a sequential replacement (docs/data.md): after the old
// generation stopped and before the new one is created, while the edge
// holds the service's requests, the old generation's volumes are
// snapshotted (the policy of [services.X.snapshots]) and, for a rollback
// with its data, restored from the snapshot the op names. A failed
// snapshot starts the old generation again and changes nothing.

// dataPlan says whether this replacement snapshots the old generation's
// volumes and which snapshot it restores ("" none).
func (s *serviceRun) dataPlan() (take bool, restore string) {
	restore = s.d.op.RestoreData[s.ps.Service]
	if s.prev == nil || len(s.prev.Spec.Volumes) == 0 || s.d.e.Snapshots == nil {
		return false, restore
	}
	policy, _ := snapshot.Policy(s.pin.spec)
	return policy != snapshot.PolicyNever, restore
}

// preserveData stops the old generation (pre_stop hooks, its grace and
// signal), takes the snapshot and restores one as dataPlan says. An error
// is the step's failure, already journaled: the caller returns it.
func (s *serviceRun) preserveData(ctx context.Context, take bool, restore string) error {
	if err := s.stopPredecessor(ctx); err != nil {
		return s.fail(ctx, err, nil)
	}
	s.oldStopped = true
	var taken *snapshot.Manifest
	if take {
		m, err := s.takeSnapshot(ctx)
		if err != nil {
			return s.undoStop(ctx, fmt.Errorf("the snapshot of its volumes before the replacement failed: %w", err))
		}
		taken = m
	}
	if restore == "" {
		return nil
	}
	if err := s.restoreSnapshot(ctx, restore); err != nil {
		why := fmt.Errorf("restoring snapshot %s failed: %w", restore, err)
		if taken != nil {
			if _, rerr := volsnap.Restore(context.WithoutCancel(ctx), s.d.e.Engine.Engine, *taken); rerr != nil {
				return s.fail(ctx, fmt.Errorf("%w; putting back the data from snapshot %s failed too (%v): the old generation %s stays stopped; restore a snapshot with `docker gordon snapshots restore %s ID`",
					why, taken.ID, rerr, readiness.ShortID(s.before), s.d.app), nil)
			}
			why = fmt.Errorf("%w; the data was put back from snapshot %s", why, taken.ID)
		}
		return s.undoStop(ctx, why)
	}
	return nil
}

// takeSnapshot is the journaled step service.<name>.snapshot.
func (s *serviceRun) takeSnapshot(ctx context.Context) (*snapshot.Manifest, error) {
	d, e, name := s.d, s.d.e, s.ps.Service
	st := s.addStep(steps.SnapshotStepID(name))
	st.Before, st.Detail = s.before, "snapshot of the volumes of "+readiness.ShortID(s.before)
	d.save(ctx)
	s.progress(steps.PhaseSnapshot, s.before, 0)
	t := time.Now()
	policy, keep := snapshot.Policy(s.pin.spec)
	res, err := volsnap.Take(ctx, e.Engine.Engine, volsnap.Request{App: d.app, Service: name, Container: s.before,
		Volumes: s.prev.Spec.Volumes, Policy: policy, Keep: keep, Trigger: snapshot.TriggerDeploy,
		Op: d.op.ID, Verb: d.op.VerbOrKind(), Revision: s.prev.EffectiveRevision})
	s.timer.done("snapshot", t)
	st = d.op.Step(steps.SnapshotStepID(name))
	st.UpdatedAt = e.Now()
	if err != nil {
		st.State, st.Error = core.StepFailed, err.Error()
		d.save(ctx)
		return nil, err
	}
	st.State, st.Snapshot = core.StepSucceeded, &res.Record
	if res.Warning != "" {
		s.warn(core.Warning{Service: name, Detail: res.Warning})
	}
	if res.Manifest.ID == "" {
		st.Detail = "no snapshot: " + res.Record.Skipped
		d.save(ctx)
		return nil, nil
	}
	st.Detail = fmt.Sprintf("snapshot %s: %d volume(s), %d bytes (%d stored) in %s", res.Manifest.ID, len(res.Manifest.Volumes),
		res.Record.Size, res.Record.Stored, res.Record.Duration.D().Round(time.Millisecond))
	d.save(ctx)
	return &res.Manifest, nil
}

// restoreSnapshot is the journaled step service.<name>.restore.
func (s *serviceRun) restoreSnapshot(ctx context.Context, id string) error {
	d, e, name := s.d, s.d.e, s.ps.Service
	st := s.addStep(steps.RestoreStepID(name))
	st.Detail = "restore snapshot " + id
	d.save(ctx)
	s.progress(steps.PhaseRestore, id, 0)
	t := time.Now()
	m, err := e.Snapshots.Get(d.app, id)
	var rec core.StepSnapshot
	if err == nil {
		rec, err = volsnap.Restore(ctx, e.Engine.Engine, m)
	}
	s.timer.done("restore", t)
	st = d.op.Step(steps.RestoreStepID(name))
	st.UpdatedAt = e.Now()
	if err != nil {
		st.State, st.Error = core.StepFailed, err.Error()
		d.save(ctx)
		return err
	}
	st.State, st.Snapshot = core.StepSucceeded, &rec
	st.Detail = fmt.Sprintf("restored snapshot %s: %d bytes in %s", id, rec.Size, rec.Duration.D().Round(time.Millisecond))
	d.save(ctx)
	return nil
}

// undoStop starts the stopped old generation again (readiness probed,
// binds re-read), publishes it without a hold, clears its
// replacement-pending marker and routes it, then fails the step with
// cause: nothing changed. If the old generation cannot serve again, the
// error says so and names reconcile.
func (s *serviceRun) undoStop(ctx context.Context, cause error) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	ctx = context.WithoutCancel(ctx)
	rec, err := s.restartStandby(ctx)
	if err == nil {
		rec.HoldUntil = nil
		err = s.republish(ctx, rec)
	}
	if err != nil {
		return s.fail(ctx, fmt.Errorf("%w; starting the old generation %s again failed too (%v): run `docker gordon reconcile %s`",
			cause, readiness.ShortID(s.before), err, app), nil)
	}
	for _, in := range s.prev.Instances() {
		if err := e.Store.ClearMarker(ctx, app, name, in.Container); err != nil {
			s.warn(core.Warning{Service: name, Leftover: in.Container, Detail: "clear recovery inhibition: " + err.Error()})
		}
	}
	if err := e.Rebuild(ctx); err != nil {
		return s.fail(ctx, fmt.Errorf("%w; the old generation %s was started again but not routed (%v): run `docker gordon reconcile %s`",
			cause, readiness.ShortID(s.before), err, app), nil)
	}
	return s.fail(ctx, fmt.Errorf("%w; the old generation %s serves again and nothing changed", cause, readiness.ShortID(s.before)), nil)
}

// republish writes rec as the service's ACTIVE record, keeping the app's
// convergence as it was.
func (s *serviceRun) republish(ctx context.Context, rec *core.ActiveService) error {
	e := s.d.e
	active, err := e.LoadActive(ctx, s.d.app)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	active.Services[s.ps.Service] = rec
	if err := e.Store.SaveActive(ctx, active); err != nil {
		return fmt.Errorf("publish ACTIVE: %w", err)
	}
	s.d.active = active
	return nil
}
