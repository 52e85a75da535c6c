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

// The data step (docs/data.md): between the old generation's stop and the
// new one's create, held, its volumes are snapshotted and, for rollback
// --with-data, restored; a failure starts the old generation again.

// dataPlan: does this replacement snapshot, and which snapshot it restores.
func (s *serviceRun) dataPlan() (take bool, restore string) {
	restore = s.d.req.RestoreData[s.ps.Service]
	if s.prev == nil || len(s.prev.Spec.Volumes) == 0 || s.d.e.Snapshots == nil {
		return false, restore
	}
	policy, _ := snapshot.Policy(s.pin.spec)
	return policy != snapshot.PolicyNever, restore
}

// preserveData stops the old generation and runs the data step; an error is journaled.
func (s *serviceRun) preserveData(ctx context.Context, take bool, restore string) error {
	d, se, name := s.d, s.d.e.Engine.Engine, s.ps.Service
	if err := s.stopPredecessor(ctx); err != nil {
		return s.fail(ctx, err, nil)
	}
	s.oldStopped = true
	j := volsnap.Journal{Op: d.op, Save: func() { d.save(ctx) }}
	cur := s.step.ID
	back := func() { s.step = d.op.Step(cur); s.timer = phaseTimer{step: s.step} }
	var taken *snapshot.Manifest
	if take {
		s.progress(steps.PhaseSnapshot, s.before, 0)
		t := time.Now()
		policy, keep := snapshot.Policy(s.pin.spec)
		m, res, err := volsnap.TakeStep(ctx, se, j, volsnap.Request{App: d.app, Service: name, Container: s.before,
			Volumes: s.prev.Spec.Volumes, Policy: policy, Keep: keep, Trigger: snapshot.TriggerDeploy,
			Op: d.op.ID, Verb: d.op.VerbOrKind(), Revision: s.prev.EffectiveRevision})
		back()
		s.timer.done("snapshot", t)
		if err != nil {
			return s.undoStop(ctx, fmt.Errorf("the snapshot of its volumes before the replacement failed: %w", err))
		}
		if res.Warning != "" {
			s.warn(core.Warning{Service: name, Detail: res.Warning})
		}
		taken = m
	}
	if restore == "" {
		return nil
	}
	s.progress(steps.PhaseRestore, restore, 0)
	err := volsnap.RestoreStep(ctx, se, j, d.app, name, restore, s.pin.spec.Volumes, taken)
	back()
	if err != nil {
		return s.undoStop(ctx, err)
	}
	return nil
}

// undoStop starts the old generation again, publishes it unheld and routes
// it, then fails the step with cause (naming reconcile if it cannot serve).
func (s *serviceRun) undoStop(ctx context.Context, cause error) error {
	e, app, name := s.d.e, s.d.app, s.ps.Service
	ctx = context.WithoutCancel(ctx)
	rec, err := s.restartStandby(ctx)
	if err == nil {
		rec.HoldUntil = nil
		var active core.Active
		if active, err = e.LoadActive(ctx, app); err == nil {
			active.Services[name] = rec
			err = e.Store.SaveActive(ctx, active)
			s.d.active = active
		}
	}
	if err == nil {
		for _, in := range s.prev.Instances() {
			if cerr := e.Store.ClearMarker(ctx, app, name, in.Container); cerr != nil {
				s.warn(core.Warning{Service: name, Leftover: in.Container, Detail: "clear recovery inhibition: " + cerr.Error()})
			}
		}
		err = e.Rebuild(ctx)
	}
	if err != nil {
		return s.fail(ctx, fmt.Errorf("%w; the old generation %s could not serve again (%v): run `docker gordon reconcile %s`",
			cause, readiness.ShortID(s.before), err, app), nil)
	}
	return s.fail(ctx, fmt.Errorf("%w; the old generation %s serves again and nothing changed", cause, readiness.ShortID(s.before)), nil)
}
