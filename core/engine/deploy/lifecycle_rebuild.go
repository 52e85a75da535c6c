package deploy

import (
	"context"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// rebuildMissing is SPEC R54, shared by start (R51.2) and restart (R53):
// load the effective revision ACTIVE records for the service; validate (and
// pull when absent) the pinned image; re-resolve binds; run the sequential
// flow (R19) with Before = the recorded container and its grace — withdraw,
// replacement-pending marker for a single-writer spec, retire Before (marker
// kept), create the candidate (R17, journaled as After on the caller's step
// i before it starts, deploy-time readiness) — and publish ACTIVE (R21a,
// clearing Before's marker). The recorded generation's other instances
// are retired with Before, and every instance the candidate creation
// started (spec.Replicas) is recorded, so a rebuilt service runs its
// declared count. No traffic rebuild and no execution recording:
// the caller does both after its single rebuild.
//
// The returned result carries After (the candidate, also on failure when
// one was created), binds, the verified start time, warnings and failure
// diagnostics. The pinned digest never changes: the ACTIVE record keeps
// its Digest and Image.
func (r *LifecycleRun) RebuildMissing(ctx context.Context, name string, as *core.ActiveService, i int) (steps.ServiceResult, error) {
	e, app := r.E, r.App
	out := steps.ServiceResult{Service: name, Before: as.Container, Flow: steps.FlowSequential, SingleWriter: as.Spec.SingleWriter()}
	start := time.Now()
	r.Emit(name, steps.PhaseResolve, "rebuild from "+as.EffectiveRevision, false)
	rev, err := e.resolveRevision(ctx, app, as.EffectiveRevision)
	if err != nil {
		return out, fmt.Errorf("rebuild: %w", err)
	}
	info, err := e.Store.LoadApp(ctx, app)
	if err != nil {
		return out, fmt.Errorf("rebuild: app %s: %w", app, err)
	}
	pin, err := r.rebuildPin(ctx, name, as, rev, start)
	if err != nil {
		return out, err
	}
	spec, img := *pin.spec, pin.img
	labels := map[string]string{core.LabelManaged: "true", core.LabelApp: app, core.LabelIncarnation: info.Incarnation, core.LabelOp: r.Op.ID}
	if _, err := e.Runtime.EnsureNetwork(ctx, core.NetworkSpec{Name: steps.NetworkName(app), Labels: labels}); err != nil {
		return out, fmt.Errorf("rebuild: ensure network %s: %w", steps.NetworkName(app), err)
	}
	for _, v := range spec.Volumes {
		vl := map[string]string{core.LabelManaged: "true", core.LabelApp: app, core.LabelService: name, core.LabelIncarnation: info.Incarnation}
		if err := e.Runtime.EnsureVolume(ctx, core.VolumeSpec{Name: steps.VolumeName(app, v.Name), Labels: vl}); err != nil {
			return out, fmt.Errorf("rebuild: ensure volume %s: %w", steps.VolumeName(app, v.Name), err)
		}
	}
	active, err := e.LoadActive(ctx, app)
	if err != nil {
		return out, fmt.Errorf("rebuild: %w", err)
	}
	// The deploy machinery runs on the caller's op and step (R54: "journaling
	// the candidate on the caller's step").
	d := &deployRun{e: e, op: r.Op, rev: rev, app: app, info: info, pinned: []*pinnedService{pin}, active: active}
	step := &r.Op.Steps[i]
	s := &serviceRun{d: d, ps: PlannedService{Service: name, Action: ActionSequential, Before: as.Container, Image: img},
		pin: pin, step: step, res: out, before: as.Container, prev: as,
		predGrace: steps.EffectiveGrace(as.Spec.StopGrace), start: start, timer: phaseTimer{step: step}}
	fail := func(err error) (steps.ServiceResult, error) {
		res := s.res
		res.After = s.after
		return res, fmt.Errorf("rebuild: %w", err)
	}
	if err := r.retireRebuilt(ctx, s, spec.SingleWriter()); err != nil {
		return fail(err)
	}
	// R19.5 / R17 candidate creation.
	if err, diags := s.createCandidate(ctx); err != nil {
		res, ferr := fail(err)
		res.Diagnostics = diags
		return res, ferr
	}
	// R21a publish ACTIVE (no route).
	if err := r.publishRebuilt(ctx, s, as); err != nil {
		return fail(err)
	}
	res := s.res
	res.After, res.StartedAt = s.after, s.startedAt
	steps.EndpointsOf(s.binds).SetOnResult(&res)
	return res, nil
}

// rebuildPin pins the service as ACTIVE records it (R54): its spec, the
// recorded image (pulled when absent) with the recorded digest, env and
// secrets as of now, secret files and binds re-resolved.
func (r *LifecycleRun) rebuildPin(ctx context.Context, name string, as *core.ActiveService, rev core.Revision, start time.Time) (*pinnedService, error) {
	e, app := r.E, r.App
	spec := as.Spec
	spec.Name = name
	img, err := e.pinImage(ctx, r.Checks, app, name, as.Image, PullMissing, start)
	if err != nil {
		return nil, fmt.Errorf("rebuild: pinned image: %w", err)
	}
	img.Ref = as.Image
	if as.Digest != "" {
		img.Digest = as.Digest
	}
	env, values, err := e.SecretEnv(ctx, r.Checks, app, &spec)
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	pin := &pinnedService{spec: &spec, img: img, env: dpContainerEnv(rev.Spec.Env, spec.Env, env), secrets: values,
		files: steps.SecretFiles(&spec, values)}
	if pin.binds, err = e.ResolveBinds(r.Checks, r.App, &spec); err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	if pin.configs, err = e.configMounts(ctx, app, &spec); err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	return pin, nil
}

// retireRebuilt runs R19.2–R19.4 on the recorded container s.before (none:
// nothing to do): withdraw it and require confirmation, save a
// replacement-pending marker when singleWriter, retire it with its grace
// keeping the marker. The error says which step failed.
func (r *LifecycleRun) retireRebuilt(ctx context.Context, s *serviceRun, singleWriter bool) error {
	e, app, name, before := r.E, r.App, s.ps.Service, s.before
	if before == "" {
		return nil
	}
	// R19.2 withdraw and require confirmation.
	if err := e.Withdraw(ctx, app, name); err != nil {
		return fmt.Errorf("withdraw %s: %w", before, err)
	}
	// R19.3 replacement-pending for a single-writer spec.
	if singleWriter {
		m := core.Marker{App: app, Service: name, Container: before, Reason: core.MarkerReplacementPending,
			Operation: r.Op.ID, CreatedAt: e.Now(), StopGrace: core.Duration(s.predGrace)}
		if err := e.Store.SaveMarker(ctx, m); err != nil {
			return fmt.Errorf("save replacement-pending marker for %s: %w", before, err)
		}
	}
	// R19.4 retire Before with its grace, keeping its marker.
	rr := e.Retire(ctx, app, before, steps.RetireOptions{Service: name, Grace: s.predGrace})
	s.warn(rr.Warnings...)
	if !rr.Gone {
		return fmt.Errorf("superseded container %s not confirmed gone: %w", before, rr.Err(before))
	}
	// The recorded generation's other instances go with it: the rebuilt
	// generation brings its own (publishRebuilt records them).
	if s.prev != nil {
		for _, id := range s.prev.ReplicaIDs() {
			rr := e.Retire(ctx, app, id, steps.RetireOptions{Service: name, Grace: s.predGrace})
			s.warn(rr.Warnings...)
			if !rr.Gone {
				return fmt.Errorf("superseded instance %s not confirmed gone: %w", id, rr.Err(id))
			}
		}
	}
	return nil
}

// publishRebuilt is R21a for a rebuilt generation: reload ACTIVE, write the
// record (same revision, image, digest and stop signal; activation by this
// op; fresh binds), save, record ownership, and in the sequential flow
// clear the replaced container's marker (an overlap's retirement-pending
// marker is cleared by the retirement, R22).
func (r *LifecycleRun) publishRebuilt(ctx context.Context, s *serviceRun, prev *core.ActiveService) error {
	e, app, name := r.E, r.App, s.ps.Service
	active, err := e.LoadActive(ctx, app)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	rec := &core.ActiveService{
		EffectiveRevision: prev.EffectiveRevision, ActivatedBy: r.Op.ID, ActivatedAt: e.Now(),
		Image: prev.Image, Digest: prev.Digest, Container: s.after, Spec: prev.Spec, StopSignal: prev.StopSignal,
	}
	steps.EndpointsOf(s.binds).SetOn(rec)
	for _, rp := range s.replicas {
		rec.Replicas = append(rec.Replicas, steps.EndpointsOf(rp.binds).Instance(rp.id))
	}
	active.Services[name] = rec
	if err := e.Store.SaveActive(ctx, active); err != nil {
		return fmt.Errorf("publish ACTIVE: %w", err)
	}
	s.d.active = active
	if err := s.saveOwnership(ctx); err != nil {
		return fmt.Errorf("publish: record ownership: %w", err)
	}
	if s.res.Flow == steps.FlowSequential && s.before != "" && s.before != s.after {
		if err := e.Store.ClearMarker(ctx, app, name, s.before); err != nil {
			s.warn(core.Warning{Service: name, Leftover: s.before, Detail: "clear recovery inhibition: " + err.Error()})
		}
	}
	return nil
}
