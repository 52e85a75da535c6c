package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// createCandidate is SPEC R17. On failure it returns the cause and the
// diagnostics; the candidate (if created) is removed with its warnings
// added to the result, and s.after stays the candidate ID.
func (s *serviceRun) createCandidate(ctx context.Context) (error, []string) {
	d, e, app, name := s.d, s.d.e, s.d.app, s.ps.Service
	spec := s.pin.spec
	cname := ContainerName(app, name, d.op.ID)
	cs, err := s.candidateSpec(ctx, cname)
	if err != nil {
		return err, nil
	}
	// 1. Create.
	t := time.Now()
	s.progress(PhaseCreate, cname, 0)
	id, err := e.Runtime.CreateContainer(ctx, cs)
	s.timer.done("create", t)
	if err != nil {
		s.dropSecretFiles(ctx)
		return fmt.Errorf("create container %s: %w", cname, err), nil
	}
	if e.AfterCreate != nil {
		e.AfterCreate(id)
	}
	s.after = id
	s.res.After = id
	// 2. Persist After before start (R5.3, S32).
	s.step.After, s.step.UpdatedAt = id, e.now()
	if err := e.Store.SaveOp(ctx, *d.op); err != nil {
		s.dropCandidate(ctx, id)
		return fmt.Errorf("journal candidate %s: %w", id, err), nil
	}
	// 3. Start.
	t = time.Now()
	s.progress(PhaseStart, id, 0)
	if err := e.Runtime.StartContainer(ctx, id); err != nil {
		s.timer.done("start", t)
		s.dropCandidate(ctx, id)
		return fmt.Errorf("start container %s: %w", id, err), nil
	}
	// 4. Observe the execution start time (unreadable → zero); a
	// candidate that already exited fails here, with its log tail (a
	// one-shot is expected to exit: runOnce waits for it).
	if st, err := e.Runtime.InspectContainer(ctx, id); err == nil {
		s.startedAt = st.StartedAt
		if st.ID == "" {
			st.ID = id
		}
		if xerr := exitOf(st); xerr != nil && spec.Run != core.RunOnce {
			s.timer.done("start", t)
			return s.candidateDied(ctx, id, xerr)
		}
	}
	s.timer.done("start", t)
	// 5. Binds and claims.
	if ports := spec.BackendPorts(); len(ports) > 0 {
		binds, err := e.Runtime.BackendBinds(ctx, id, ports)
		if err != nil {
			if xerr := e.candidateExit(ctx, id); xerr != nil {
				return s.candidateDied(ctx, id, xerr)
			}
			s.dropCandidate(ctx, id)
			return fmt.Errorf("read backend binds of %s: %w", id, err), nil
		}
		if err := e.registerBackendClaims(ctx, app, id, binds); err != nil {
			s.dropCandidate(ctx, id)
			return fmt.Errorf("register backend claims of %s: %w", id, err), nil
		}
		s.binds = binds
	}
	s.res.BackendBinds, s.res.UDPBackendBinds = dpBindMaps(s.binds)
	// 6. Readiness with the deploy-time probe.
	t = time.Now()
	err = s.ready(ctx)
	s.timer.done("probe", t)
	if err != nil {
		diags := e.logTail(ctx, id, s.pin.secrets)
		s.dropCandidate(ctx, id)
		return fmt.Errorf("readiness of %s: %w", id, err), diags
	}
	// 7. Success: a ready candidate gets its restart policy (R59).
	if s.deferredPolicy {
		w, err := e.grantRestartPolicy(ctx, name, id)
		s.warn(w...)
		if err != nil {
			s.dropCandidate(ctx, id)
			return err, nil
		}
	}
	s.res.StartedAt = s.startedAt
	return nil, nil
}

// candidateSpec is the container spec of the service's candidate named
// cname (R17): pinned image and env, app network and alias, container keys,
// gordon labels, volume, bind and secret-file mounts. Secret files are
// written per container, keyed by cname.
func (s *serviceRun) candidateSpec(ctx context.Context, cname string) (core.ContainerSpec, error) {
	d, e, app, name := s.d, s.d.e, s.d.app, s.ps.Service
	spec := s.pin.spec
	cs := core.ContainerSpec{
		Name:          cname,
		Image:         s.pin.img.Ref,
		Env:           s.pin.env,
		Hostname:      name,
		Network:       NetworkName(app),
		Aliases:       []string{name},
		ExtraNetworks: d.rev.Spec.Networks,
		Ports:         spec.BackendPorts(),
		Devices:       spec.Devices,
		StopGrace:     EffectiveGrace(spec.StopGrace),
		Labels:        map[string]string{},
	}
	applyContainerKeys(&cs, spec, s.pin.img)
	if spec.Run == core.RunOnce {
		cs.RestartPolicy = "" // runs to completion, never restarted
	}
	s.deferredPolicy = e.deferRestartPolicy(&cs)
	for k, v := range map[string]string{
		core.LabelManaged: "true", core.LabelApp: app, core.LabelService: name, core.LabelIncarnation: d.info.Incarnation,
		core.LabelOp: d.op.ID, core.LabelRevision: d.rev.ID, core.LabelRole: "workload",
	} {
		cs.Labels[k] = v
	}
	for _, v := range spec.Volumes {
		cs.Mounts = append(cs.Mounts, core.Mount{Type: core.MountVolume, Source: VolumeName(app, v.Name), Target: v.Path, ReadOnly: v.ReadOnly})
	}
	for _, b := range spec.Binds {
		cs.Mounts = append(cs.Mounts, core.Mount{Type: core.MountBind, Source: s.pin.binds[b.Name], Target: b.Path, ReadOnly: b.ReadOnly})
	}
	for _, fn := range slices.Sorted(maps.Keys(s.pin.files)) {
		// Per-container copies are keyed by the container name: the ID is
		// not known before creation (decision 13).
		path, err := e.Store.WriteContainerSecret(ctx, app, cname, fn, s.pin.files[fn])
		if err != nil {
			return core.ContainerSpec{}, fmt.Errorf("write secret file %s: %w", fn, err)
		}
		cs.Mounts = append(cs.Mounts, core.Mount{Type: core.MountBind, Source: path, Target: "/run/secrets/" + fn, ReadOnly: true})
	}
	return cs, nil
}

// dropCandidate removes a failed candidate (R24) and its per-container
// secret files; every problem becomes a warning on the result.
func (s *serviceRun) dropCandidate(ctx context.Context, id string) {
	s.warn(s.d.e.removeCandidate(ctx, s.d.app, s.ps.Service, id)...)
	s.dropSecretFiles(ctx)
}

// dropSecretFiles deletes the candidate's file-secret copies, which are
// keyed by the container name (decision 13).
func (s *serviceRun) dropSecretFiles(ctx context.Context) {
	if len(s.pin.files) == 0 {
		return
	}
	cname := ContainerName(s.d.app, s.ps.Service, s.d.op.ID)
	if err := s.d.e.Store.DeleteContainerSecrets(ctx, s.d.app, cname); err != nil {
		s.warn(core.Warning{Service: s.ps.Service, Leftover: cname, Detail: "secret files cleanup failed: " + err.Error()})
	}
}

// ready runs the deploy-time probe (R29) on the candidate's fresh binds.
func (s *serviceRun) ready(ctx context.Context) error {
	e := s.d.e
	spec := s.pin.spec
	if spec.Run == core.RunOnce {
		return nil // a one-shot is waited for until it exits (runOnce)
	}
	r := DeployReadinessFor(spec, s.pin.img.HasHealthcheck)
	if r.Type == "" || r.Type == core.ReadinessNone {
		return nil
	}
	if e.Readiness == nil && r.Type != core.ReadinessDocker {
		return fmt.Errorf("%w: no readiness backend for %s readiness", core.ErrUnavailable, r.Type)
	}
	target, err := ProbeTargetFor(s.d.app, spec, r, s.after, s.startedAt, s.binds)
	if err != nil {
		return err
	}
	s.progress(PhaseProbe, target.Address, 0)
	// The candidate is watched while it is probed: an exit ends the wait
	// at once with its exit code instead of probing until the timeout.
	wctx, stop, exited := e.watchCandidate(ctx, s.after)
	_, err = e.waitReady(wctx, target, r, func(w WaitResult) {
		s.progress(PhaseProbe, w.LastDetail, w.Attempts)
	})
	stop()
	if xerr := exited(); xerr != nil {
		return xerr
	}
	if err != nil && ctx.Err() == nil {
		if xerr := e.candidateExit(ctx, s.after); xerr != nil {
			return xerr
		}
	}
	return err
}

// candidateDied fails the candidate step for a candidate that stopped
// running: the cause names its exit, the diagnostics are its log tail.
func (s *serviceRun) candidateDied(ctx context.Context, id string, cause error) (error, []string) {
	diags := s.d.e.logTail(ctx, id, s.pin.secrets)
	s.dropCandidate(ctx, id)
	return cause, diags
}

// logTail captures the candidate's last LogTailLines (default 50) lines
// within 10 s, with every secret value of the service replaced by "****"
// (R17.6). Errors only shorten the tail.
func (e *Engine) logTail(ctx context.Context, id string, secrets []string) []string {
	n := e.LogTailLines
	if n <= 0 {
		n = 50
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var lines []string
	err := e.Runtime.Logs(lctx, id, core.LogOptions{Tail: n}, func(l core.LogLine) error {
		lines = append(lines, dpRedact(l.Text, secrets))
		return nil
	})
	if err != nil {
		e.log().Debug("failure log tail", "container", id, "error", err)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// dpRedact replaces every non-empty secret value in line with "****".
func dpRedact(line string, secrets []string) string {
	sorted := append([]string(nil), secrets...)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i]) > len(sorted[j]) })
	for _, v := range sorted {
		if v != "" {
			line = strings.ReplaceAll(line, v, "****")
		}
	}
	return line
}
