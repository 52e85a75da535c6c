package deploy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// createCandidate is SPEC R17 for every instance of the service's new
// generation (ServiceSpec.Instances; a one-shot has one): the instances are
// created, started and probed in parallel, the first (the primary, whose
// ID is the step's After) in this goroutine, the replicas beside it (their
// IDs journaled as the step's Replicas). The first failure cancels the
// others; every instance created is then removed, its warnings added to
// the result, and the cause and diagnostics of that failure are returned.
// s.after stays the primary's ID.
func (s *serviceRun) createCandidate(ctx context.Context) (error, []string) {
	n := s.pin.spec.Instances()
	if s.pin.spec.Run == core.RunOnce {
		n = 1
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	var first *instanceRun
	runs := make([]instanceRun, n)
	run := func(i int) {
		r := s.createInstance(cctx, i, n)
		mu.Lock()
		defer mu.Unlock()
		runs[i] = r
		if r.err != nil && first == nil {
			first = &runs[i]
			cancel(r.err)
		}
	}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() { run(i) })
	}
	run(0)
	wg.Wait()
	for _, r := range runs {
		s.warn(r.warnings...)
	}
	p := runs[0]
	s.after, s.res.After = p.id, p.id
	if first != nil {
		for _, r := range runs {
			if r.id != "" && r.err == nil {
				s.dropInstance(ctx, r)
			}
		}
		return first.err, first.diags
	}
	s.startedAt, s.binds = p.startedAt, p.binds
	s.replicas = runs[1:]
	steps.EndpointsOf(s.binds).SetOnResult(&s.res)
	s.res.StartedAt = s.startedAt
	return nil, nil
}

// instanceRun is one instance of a candidate generation being created
// (R17): its container, binds and start time, or the failure that removed
// it (err, diags) with the warnings of that removal.
type instanceRun struct {
	index     int
	id, name  string
	startedAt time.Time
	binds     []core.BackendBind
	warnings  []core.Warning
	err       error
	diags     []string
}

// instanceName is the container name of instance i of the candidate: the
// primary's is ContainerName, replica i's has "-<i+1>" appended.
func (s *serviceRun) instanceName(i int) string {
	name := steps.ContainerName(s.d.app, s.ps.Service, s.d.op.ID)
	if i > 0 {
		name += "-" + strconv.Itoa(i+1)
	}
	return name
}

// instanceHostname is the hostname of instance i (0-based) of n: the
// service name for a service of one instance, "<service>-<i+1>" when it
// runs several, so replicas tell themselves apart (worker names, metrics
// instance labels) while the service name stays their network alias.
func instanceHostname(service string, i, n int) string {
	if n <= 1 && i == 0 {
		return service
	}
	return service + "-" + strconv.Itoa(i+1)
}

// createInstance is R17 steps 1–6 for instance i of n: create, journal the
// ID (After for the primary, Replicas for the others) before start, start,
// observe the start time, read binds and register claims, probe. A failed
// instance is removed before it returns. Only the primary reports progress
// and phase times.
func (s *serviceRun) createInstance(ctx context.Context, i, n int) (r instanceRun) {
	e := s.d.e
	spec := s.pin.spec
	r = instanceRun{index: i, name: s.instanceName(i)}
	what := r.name
	if n > 1 {
		what = fmt.Sprintf("%s (instance %d of %d)", r.name, i+1, n)
	}
	progress, done := func(steps.Phase, string) {}, func(string, time.Time) {}
	if i == 0 {
		progress = func(p steps.Phase, detail string) { s.progress(p, detail, 0) }
		done = func(phase string, t time.Time) {
			// Phases are on the step the replicas' journal saves encode.
			s.journalMu.Lock()
			defer s.journalMu.Unlock()
			s.timer.done(phase, t)
		}
	}
	fail := func(err error, drop bool) instanceRun {
		r.err = err
		if drop {
			r.warnings = append(r.warnings, s.removeInstance(ctx, r)...)
		}
		return r
	}
	cs, err := s.candidateSpec(ctx, r.name)
	if err != nil {
		return fail(err, false)
	}
	cs.Hostname = instanceHostname(s.ps.Service, i, n)
	deferred := e.DeferRestartPolicy(&cs)
	// 1. Create.
	t := time.Now()
	progress(steps.PhaseCreate, r.name)
	id, err := e.Runtime.CreateContainer(ctx, cs)
	done("create", t)
	if err != nil {
		r.warnings = append(r.warnings, s.dropSecretFilesOf(ctx, r.name)...)
		return fail(fmt.Errorf("create container %s: %w", what, err), false)
	}
	if e.AfterCreate != nil {
		e.AfterCreate(id)
	}
	r.id = id
	// 2. Persist the ID before start (R5.3, S32).
	if err := s.journalInstance(ctx, i, id); err != nil {
		return fail(fmt.Errorf("journal candidate %s: %w", id, err), true)
	}
	// 3. Start.
	t = time.Now()
	progress(steps.PhaseStart, id)
	if err := e.Runtime.StartContainer(ctx, id); err != nil {
		done("start", t)
		return fail(fmt.Errorf("start container %s: %w", what, err), true)
	}
	// 4. Observe the execution start time (unreadable → zero); a
	// candidate that already exited fails here, with its log tail (a
	// one-shot is expected to exit: runOnce waits for it).
	if st, err := e.Runtime.InspectContainer(ctx, id); err == nil {
		r.startedAt = st.StartedAt
		if st.ID == "" {
			st.ID = id
		}
		if xerr := steps.ExitOf(st); xerr != nil && spec.Run != core.RunOnce {
			done("start", t)
			r.diags = e.LogTail(ctx, id, s.pin.secrets)
			return fail(xerr, true)
		}
	}
	done("start", t)
	// 5. post_start hooks (R72), then binds and claims.
	if err := s.afterStart(ctx, &r, what, done); err != nil {
		return fail(err, true)
	}
	// 6. Readiness with the deploy-time probe.
	t = time.Now()
	err = s.readyOf(ctx, id, r.startedAt, r.binds, i == 0)
	done("probe", t)
	if err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), ctx.Err()) {
			// Another instance failed first: this one is only removed.
			return fail(context.Cause(ctx), true)
		}
		r.diags = e.LogTail(ctx, id, s.pin.secrets)
		if n > 1 {
			return fail(fmt.Errorf("readiness of %s (instance %d of %d): %w", id, i+1, n, err), true)
		}
		return fail(fmt.Errorf("readiness of %s: %w", id, err), true)
	}
	// 7. Success: a ready candidate gets its restart policy (R59).
	if deferred {
		w, err := e.GrantRestartPolicy(ctx, s.ps.Service, id)
		r.warnings = append(r.warnings, w...)
		if err != nil {
			return fail(err, true)
		}
	}
	return r
}

// instanceBinds is R17.5 for one instance: read its binds for the spec's
// backend ports and register its claims. An instance that exited meanwhile
// fails with its exit, its log tail in r.diags.
func (s *serviceRun) instanceBinds(ctx context.Context, r *instanceRun) error {
	e := s.d.e
	ports := s.pin.spec.BackendPorts()
	if len(ports) == 0 {
		return nil
	}
	binds, err := e.Runtime.BackendBinds(ctx, r.id, ports)
	if err != nil {
		if xerr := e.CandidateExit(ctx, r.id); xerr != nil {
			r.diags = e.LogTail(ctx, r.id, s.pin.secrets)
			return xerr
		}
		return fmt.Errorf("read backend binds of %s: %w", r.id, err)
	}
	if err := steps.VerifyBinds(s.d.app, r.id, e.EdgeNetwork, binds); err != nil {
		return err
	}
	if err := e.RegisterBackendClaims(ctx, s.d.app, r.id, binds); err != nil {
		return fmt.Errorf("register backend claims of %s: %w", r.id, err)
	}
	r.binds = binds
	return nil
}

// journalInstance persists instance i's container ID on the step before
// the container is started (R5.3): the primary's as After, a replica's
// appended to Replicas. Saves are serialized; a cancelled deploy still
// saves.
func (s *serviceRun) journalInstance(ctx context.Context, i int, id string) error {
	s.journalMu.Lock()
	defer s.journalMu.Unlock()
	e := s.d.e
	if i == 0 {
		s.step.After = id
	} else {
		s.step.Replicas = append(s.step.Replicas, id)
	}
	s.step.UpdatedAt = e.Now()
	return e.Store.SaveOp(context.WithoutCancel(ctx), *s.d.op)
}

// removeInstance removes a created instance of a failed candidate (R24)
// with its per-container secret files and returns the warnings.
func (s *serviceRun) removeInstance(ctx context.Context, r instanceRun) []core.Warning {
	ws := s.d.e.RemoveCandidate(ctx, s.d.app, s.ps.Service, r.id)
	return append(ws, s.dropSecretFilesOf(ctx, r.name)...)
}

// dropInstance removes an instance that was ready when another instance
// of its candidate failed; its warnings go on the result.
func (s *serviceRun) dropInstance(ctx context.Context, r instanceRun) {
	s.warn(s.removeInstance(ctx, r)...)
}

// candidateSpec is the container spec of the service's candidate named
// cname (R17): pinned image and env, app network and alias, container keys,
// gordon labels, volume, bind, project-file and secret-file mounts. Secret files are
// written per container, keyed by cname.
func (s *serviceRun) candidateSpec(ctx context.Context, cname string) (core.ContainerSpec, error) {
	d, e, app, name := s.d, s.d.e, s.d.app, s.ps.Service
	spec := s.pin.spec
	cs := core.ContainerSpec{
		Name:          cname,
		Image:         s.pin.img.Ref,
		Env:           s.pin.env,
		Hostname:      name,
		Network:       steps.NetworkName(app),
		Aliases:       append([]string{name}, spec.Aliases...),
		ExtraNetworks: d.rev.Spec.Networks,
		Ports:         spec.BackendPorts(),
		Devices:       spec.Devices,
		StopGrace:     steps.EffectiveGrace(spec.StopGrace),
		Labels:        map[string]string{},
		Node:          spec.Node,
	}
	steps.ApplyContainerKeys(&cs, spec, s.pin.img)
	if spec.Run == core.RunOnce {
		cs.RestartPolicy = "" // runs to completion, never restarted
	}
	for k, v := range map[string]string{
		core.LabelManaged: "true", core.LabelApp: app, core.LabelService: name, core.LabelIncarnation: d.info.Incarnation,
		core.LabelOp: d.op.ID, core.LabelRevision: d.rev.ID, core.LabelRole: "workload",
	} {
		cs.Labels[k] = v
	}
	if len(spec.Placement) > 0 {
		cs.Labels[core.LabelPlacement] = strings.Join(spec.Placement, "\n")
	}
	for _, v := range spec.Volumes {
		cs.Mounts = append(cs.Mounts, core.Mount{Type: core.MountVolume, Source: steps.VolumeName(app, v.Name), Target: v.Path, ReadOnly: v.ReadOnly})
	}
	for _, b := range spec.Binds {
		cs.Mounts = append(cs.Mounts, core.Mount{Type: core.MountBind, Source: s.pin.binds[b.Name], Target: b.Path, ReadOnly: b.ReadOnly})
	}
	cs.Mounts = append(cs.Mounts, s.pin.configs...)
	for _, fn := range slices.Sorted(maps.Keys(s.pin.files)) {
		// Per-container copies are keyed by the container name: the ID is
		// not known before creation (decision 13).
		path, err := e.Store.WriteContainerSecret(ctx, app, cname, fn, s.pin.files[fn])
		if err != nil {
			return core.ContainerSpec{}, fmt.Errorf("write secret file %s: %w", fn, err)
		}
		cs.Mounts = append(cs.Mounts, core.Mount{Type: core.MountBind, Source: path, Target: "/run/secrets/" + fn, ReadOnly: true, Secret: fn})
	}
	return cs, nil
}

// dropCandidate removes a failed candidate's primary (R24) and its
// per-container secret files; every problem becomes a warning on the
// result.
func (s *serviceRun) dropCandidate(ctx context.Context, id string) {
	s.warn(s.d.e.RemoveCandidate(ctx, s.d.app, s.ps.Service, id)...)
	s.dropSecretFiles(ctx)
}

// dropSecretFiles deletes the primary's file-secret copies, which are
// keyed by the container name (decision 13).
func (s *serviceRun) dropSecretFiles(ctx context.Context) {
	s.warn(s.dropSecretFilesOf(ctx, s.instanceName(0))...)
}

// dropSecretFilesOf deletes the file-secret copies of the container named
// cname and returns a warning when that fails.
func (s *serviceRun) dropSecretFilesOf(ctx context.Context, cname string) []core.Warning {
	if len(s.pin.files) == 0 {
		return nil
	}
	if err := s.d.e.Store.DeleteContainerSecrets(ctx, s.d.app, cname); err != nil {
		return []core.Warning{{Service: s.ps.Service, Leftover: cname, Detail: "secret files cleanup failed: " + err.Error()}}
	}
	return nil
}

// readyOf runs the deploy-time probe (R29) on one instance (container id,
// its execution start time and fresh binds); report says whether its
// attempts go to progress.
func (s *serviceRun) readyOf(ctx context.Context, id string, startedAt time.Time, binds []core.BackendBind, report bool) error {
	e := s.d.e
	spec := s.pin.spec
	if spec.Run == core.RunOnce {
		return nil // a one-shot is waited for until it exits (runOnce)
	}
	r := readiness.DeployReadinessFor(spec, s.pin.img.HasHealthcheck)
	if r.Type == "" || r.Type == core.ReadinessNone {
		return nil
	}
	if e.Readiness == nil && r.Type != core.ReadinessDocker {
		return fmt.Errorf("%w: no readiness backend for %s readiness", core.ErrUnavailable, r.Type)
	}
	target, err := readiness.ProbeTargetFor(s.d.app, spec, r, id, startedAt, binds)
	if err != nil {
		return err
	}
	progress := func(readiness.WaitResult) {}
	if report {
		s.progress(steps.PhaseProbe, target.Address, 0)
		progress = func(w readiness.WaitResult) { s.progress(steps.PhaseProbe, w.LastDetail, w.Attempts) }
	}
	// The candidate is watched while it is probed: an exit ends the wait
	// at once with its exit code instead of probing until the timeout.
	wctx, stop, exited := e.WatchCandidate(ctx, id)
	_, err = e.WaitReady(wctx, target, r, progress)
	stop()
	if xerr := exited(); xerr != nil {
		return xerr
	}
	if err != nil && ctx.Err() == nil {
		if xerr := e.CandidateExit(ctx, id); xerr != nil {
			return xerr
		}
	}
	return err
}

// logTail captures the candidate's last LogTailLines (default 50) lines
// within 10 s, with every secret value of the service replaced by "****"
// (R17.6). Errors only shorten the tail.
func (e *Engine) LogTail(ctx context.Context, id string, secrets []string) []string {
	n := e.LogTailLines
	if n <= 0 {
		n = 50
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var lines []string
	err := e.Runtime.Logs(lctx, id, core.LogOptions{Tail: n}, func(l core.LogLine) error {
		lines = append(lines, steps.DpRedact(l.Text, secrets))
		return nil
	})
	if err != nil {
		e.Log().Debug("failure log tail", "container", id, "error", err)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
