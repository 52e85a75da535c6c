package deploy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/privilege"
)

// deployRun is the state of one executing deploy (R12 execute phase).
type deployRun struct {
	e      *Engine
	req    DeployRequest
	op     *core.Operation
	rev    core.Revision
	app    string
	info   core.AppInfo
	pinned []*pinnedService
	active core.Active
	plan   Plan
	// checks is the memo of the lock hold the deploy runs under.
	checks *steps.HeldChecks

	results     []steps.ServiceResult
	appWarnings []core.Warning
	// hookFailures are the after_switch hooks that failed (R72).
	hookFailures []string
}

// pinnedService is one service's preflight outcome (R13).
type pinnedService struct {
	spec    *core.ServiceSpec
	img     core.ImageRef
	env     []string // KEY=value (S28)
	secrets []string // secret values, for redaction
	files   map[string][]byte
	binds   map[string]string // bind name → host path
	configs []core.Mount      // project files' read-only binds (SPEC R82)
}

// executeDeploy is R12's execute phase; the caller holds the app lock and
// the op is live. It reloads the op, replays a terminal one, runs
// preflight, dropped services and every service step, then finalizes.
func (e *Engine) executeDeploy(ctx context.Context, req DeployRequest, opID string) (*DeployResult, error) {
	app := req.App
	op, err := e.Store.LoadOp(ctx, app, opID)
	if err != nil {
		return nil, fmt.Errorf("deploy %s: reload operation %s: %w", app, opID, err)
	}
	if op.App != app || op.ID != opID || op.Kind != core.OpDeploy {
		return nil, fmt.Errorf("%w: deploy %s: operation %s is %s of app %s, not a deploy of %s", core.ErrConflict, app, opID, op.Kind, op.App, app)
	}
	if op.Terminal() {
		return replayResult(op), steps.ReplayError(op)
	}
	d := &deployRun{e: e, req: req, op: &op, app: app, checks: req.held, appWarnings: req.Warnings}
	d.rev, err = e.resolveRevision(ctx, app, op.Revision)
	if err != nil {
		return d.failApp(ctx, steps.StepError, err)
	}
	d.info, err = e.Store.LoadApp(ctx, app)
	if err != nil {
		return d.failApp(ctx, steps.StepError, fmt.Errorf("app %s: %w", app, err))
	}
	if err := d.preflight(ctx); err != nil {
		return d.result(), err
	}
	d.active, err = e.LoadActive(ctx, app)
	if err != nil {
		return d.failApp(ctx, steps.StepError, err)
	}
	resolved := map[string]core.ImageRef{}
	for _, p := range d.pinned {
		resolved[p.spec.Name] = p.img
	}
	in, err := e.observe(ctx, d.checks, d.rev, d.active, resolved)
	if err != nil {
		return d.failApp(ctx, steps.StepError, err)
	}
	for _, p := range d.pinned {
		if len(p.files) == 0 {
			in.DesiredEnv[p.spec.Name] = p.env
		}
	}
	in.Services = req.Services
	in.Restore = req.RestoreData
	d.plan = in.Build()
	for _, drop := range d.plan.Drops {
		if err := d.dropService(ctx, drop); err != nil {
			return d.result(), err
		}
	}
	for _, ps := range d.plan.Services {
		if err := d.runService(ctx, ps); err != nil {
			return d.result(), err
		}
	}
	d.finish(ctx)
	return d.result(), d.afterSwitchErr()
}

// result projects the run into a DeployResult; each service that serves
// two or more instances lists them (ACTIVE as this run left it).
func (d *deployRun) result() *DeployResult {
	p := d.plan
	for i := range d.results {
		r := &d.results[i]
		as := d.active.Services[r.Service]
		r.Instances = nil
		if as == nil || r.Result == steps.ResultFailed || r.Result == steps.ResultRemoved || as.Container != r.After || len(as.Replicas) == 0 {
			continue
		}
		for _, in := range as.Instances() {
			r.Instances = append(r.Instances, in.Container)
		}
	}
	return &DeployResult{Op: *d.op, Services: d.results, Outcome: d.op.Outcome, Warnings: d.op.Warnings, Plan: &p}
}

// finish computes outcome and warnings and saves the terminal journal.
func (d *deployRun) finish(ctx context.Context) {
	d.op.Outcome = afterSwitchOutcome(steps.Outcome(d.results, false), d.hookFailures)
	d.op.Warnings = steps.Warnings(d.results, d.appWarnings)
	d.op.FinishedAt = d.e.Now()
	d.save(ctx)
}

// save saves the journal; a failure is only logged (R14.8, R11).
func (d *deployRun) save(ctx context.Context) {
	// The journal is saved even when the caller cancelled (R11, S14).
	if err := d.e.Store.SaveOp(context.WithoutCancel(ctx), *d.op); err != nil {
		d.e.Log().Error("save operation", "app", d.app, "op", d.op.ID, "error", err)
	}
}

// failApp fails the op at app level (R11) and returns the error.
func (d *deployRun) failApp(ctx context.Context, stepID string, err error) (*DeployResult, error) {
	d.op.Warnings = steps.Warnings(d.results, d.appWarnings)
	d.e.FailOp(ctx, d.op, stepID, err.Error())
	return d.result(), err
}

// step returns the journal step id (appending a pending one if absent).
func (d *deployRun) step(id, service string) *core.Step {
	if s := d.op.Step(id); s != nil {
		return s
	}
	now := d.e.Now()
	d.op.Steps = append(d.op.Steps, core.Step{ID: id, State: core.StepPending, Service: service, StartedAt: now, UpdatedAt: now})
	return &d.op.Steps[len(d.op.Steps)-1]
}

// preflight is SPEC R13. On failure the `preflight` step is failed, the
// outcome failed, the journal saved and nothing running is touched (S23).
// On success it saves one pending service.<name>.replace step per pinned
// service (digest, image) before any mutation (R5.2).
func (d *deployRun) preflight(ctx context.Context) error {
	e, app := d.e, d.app
	start := time.Now()
	fail := func(service string, err error) error { return d.failPreflight(ctx, service, err, start) }
	names := d.preflightNames()
	if err := e.checkTraffic(ctx, d.checks, app); err != nil {
		return fail("", err)
	}
	owners, err := e.PublishOwners(ctx)
	if err != nil {
		return fail("", err)
	}
	if service, err := d.preflightImageChecks(ctx, names); err != nil {
		return fail(service, err)
	}
	labels := map[string]string{core.LabelManaged: "true", core.LabelApp: app, core.LabelIncarnation: d.info.Incarnation, core.LabelOp: d.op.ID}
	if _, err := e.Runtime.EnsureNetwork(ctx, core.NetworkSpec{Name: steps.NetworkName(app), Labels: labels}); err != nil {
		return fail("", fmt.Errorf("ensure network %s: %w", steps.NetworkName(app), err))
	}
	for _, name := range names {
		p, err := d.pinService(ctx, name, owners, start)
		if err != nil {
			return fail(name, err)
		}
		d.pinned = append(d.pinned, p)
	}
	if err := d.journalPinned(ctx, start); err != nil {
		return fail("", err)
	}
	if err := e.Store.SaveOp(ctx, *d.op); err != nil {
		_, ferr := d.failApp(ctx, steps.StepError, fmt.Errorf("deploy %s: save pinned table: %w", app, err))
		return ferr
	}
	return nil
}

// failPreflight fails the `preflight` step and the op with err, saves the
// journal, reports the failure as progress and returns err classed (R13).
func (d *deployRun) failPreflight(ctx context.Context, service string, err error, start time.Time) error {
	e, app := d.e, d.app
	s := d.step(steps.StepPreflight, "")
	s.State, s.Error, s.UpdatedAt = core.StepFailed, err.Error(), e.Now()
	d.op.Outcome = core.OutcomeFailed
	d.op.FinishedAt = e.Now()
	d.save(ctx)
	e.Emit(steps.ProgressEvent{App: app, Service: service, Phase: steps.PhaseFailed, Detail: "preflight: " + err.Error(), Elapsed: time.Since(start), Done: true})
	where := ""
	if service != "" {
		where = " service " + service + ":"
	}
	return fmt.Errorf("deploy %s:%s step %s: %w", app, where, steps.StepPreflight, classOf(ctx, err))
}

// preflightNames is the sorted set of services the deploy touches: the
// requested ones, else every service of the revision.
func (d *deployRun) preflightNames() []string {
	names := d.req.Services
	if len(names) == 0 {
		for _, s := range d.rev.Spec.Services {
			names = append(names, s.Name)
		}
	}
	return steps.SortedServiceNames(names)
}

// pinService runs R13's per-service checks and pins the service: plugin
// readiness accepted, image resolved (per pull policy) and checked, secrets
// set and read, binds resolved, published ports and volumes owned by no
// other app, volumes ensured. Nothing running is touched.
func (d *deployRun) pinService(ctx context.Context, name string, owners map[string]string, start time.Time) (*pinnedService, error) {
	e, app := d.e, d.app
	spec, ok := d.rev.Spec.Service(name)
	if !ok {
		return nil, fmt.Errorf("%w: revision %s declares no service %q", core.ErrInvalid, d.rev.ID, name)
	}
	if e.Readiness != nil && e.Readiness.Probes != nil {
		// A custom probe plugin must be found and accept its config before
		// anything is touched (R13).
		if err := readiness.ValidatePluginReadiness(ctx, e.Readiness.Probes, app, []core.ServiceSpec{*spec}); err != nil {
			return nil, err
		}
	}
	if err := e.CheckHookRuntime(spec); err != nil {
		return nil, err
	}
	if err := e.checkPrivileges(app, spec); err != nil {
		return nil, fmt.Errorf("app %s: service %s: %w", app, name, err)
	}
	p := &pinnedService{spec: spec}
	e.Emit(steps.ProgressEvent{App: app, Service: name, Phase: steps.PhaseResolve, Detail: spec.Image, Elapsed: time.Since(start)})
	img, ok := e.takePin(spec.Image, d.req.Pull)
	if !ok {
		var err error
		if img, err = e.pinImage(ctx, d.checks, app, name, spec.Image, d.req.Pull, start); err != nil {
			return nil, err
		}
	}
	p.img = img
	if err := checkPinnedImage(app, spec, img); err != nil {
		return nil, err
	}
	if err := e.CheckSecretsSet(ctx, d.checks, app, spec); err != nil {
		return nil, err
	}
	env, values, err := e.SecretEnv(ctx, d.checks, app, spec)
	if err != nil {
		return nil, err
	}
	p.secrets = values
	p.env = dpContainerEnv(d.rev.Spec.Env, spec.Env, env)
	p.files = steps.SecretFiles(spec, values)
	if p.binds, err = e.ResolveBinds(d.checks, app, spec); err != nil {
		return nil, fmt.Errorf("app %s: service %s: %w", app, name, err)
	}
	if p.configs, err = e.configMounts(ctx, app, spec); err != nil {
		return nil, err
	}
	if err := e.CheckPublish(ctx, app, spec, owners); err != nil {
		return nil, err
	}
	if err := e.CheckVolumeOwners(ctx, app, d.info.Incarnation, spec); err != nil {
		return nil, err
	}
	for _, v := range spec.Volumes {
		vl := map[string]string{core.LabelManaged: "true", core.LabelApp: app, core.LabelService: name, core.LabelIncarnation: d.info.Incarnation}
		if err := e.Runtime.EnsureVolume(ctx, core.VolumeSpec{Name: steps.VolumeName(app, v.Name), Labels: vl}); err != nil {
			return nil, fmt.Errorf("ensure volume %s: %w", steps.VolumeName(app, v.Name), err)
		}
	}
	return p, nil
}

// journalPinned marks `preflight` succeeded and adds the pending steps the
// deploy will run: a service.<name>.remove step per ACTIVE service the
// revision dropped (full deploys only) and a service.<name>.replace step
// with the pinned digest and image and, as Before, the container ACTIVE
// names for it, per pinned service (R5.2).
func (d *deployRun) journalPinned(ctx context.Context, start time.Time) error {
	e, app := d.e, d.app
	now := e.Now()
	pf := d.step(steps.StepPreflight, "")
	pf.State, pf.Error, pf.UpdatedAt = core.StepSucceeded, "", now
	pf.Phases = map[string]core.Duration{"preflight": core.Duration(time.Since(start)), "lock": core.Duration(d.req.lockWait)}
	active, err := e.LoadActive(ctx, app)
	if err != nil {
		return err
	}
	if len(d.req.Services) == 0 {
		for _, name := range slices.Sorted(maps.Keys(active.Services)) {
			if _, ok := d.rev.Spec.Service(name); !ok {
				s := d.step(steps.ServiceStepID(name, "remove"), name)
				s.Before = active.Services[name].Container
			}
		}
	}
	for _, p := range d.pinned {
		s := d.step(steps.ServiceStepID(p.spec.Name, "replace"), p.spec.Name)
		s.Digest, s.Image = p.img.Digest, p.img.Ref
		// Before is journaled with the pinned table: a crash after the
		// sequential flow removed it still names the generation the step
		// replaces, so reconciliation can roll it back (R47).
		if cur := active.Services[p.spec.Name]; cur != nil {
			s.Before = cur.Container
		}
	}
	return nil
}

// pinImage resolves (and per policy pulls) ref (R13, decision 15):
// always → pull then resolve; missing → resolve, pull only on not-found,
// resolve again; never → not found is a failure naming the image.
func (e *Engine) pinImage(ctx context.Context, c *steps.HeldChecks, app, service, ref, pull string, start time.Time) (core.ImageRef, error) {
	if pull == "" {
		pull = PullMissing
	}
	doPull := func() error {
		e.Emit(steps.ProgressEvent{App: app, Service: service, Phase: steps.PhasePull, Detail: ref, Elapsed: time.Since(start)})
		pctx := ctx
		if e.RegistryAuth != nil {
			pctx = core.WithRegistryAuth(ctx, e.RegistryAuth(ref))
		}
		e.ForgetImage(c, ref)
		if err := e.Runtime.PullImage(pctx, ref); err != nil {
			return fmt.Errorf("pull image %s: %w", ref, err)
		}
		return nil
	}
	if pull == PullAlways {
		if err := doPull(); err != nil {
			return core.ImageRef{}, err
		}
	}
	img, err := e.ResolveImage(ctx, c, ref)
	if errors.Is(err, core.ErrNotFound) && pull == PullMissing {
		if err := doPull(); err != nil && e.RegistryOnly {
			return core.ImageRef{}, fmt.Errorf("image %s could not be pulled (%w): every node pulls it from a registry, so push it to one the nodes can reach (docker push %s), correct the name, or log in to its registry (docker login)", ref, err, ref)
		} else if err != nil {
			return core.ImageRef{}, fmt.Errorf("image %s is not on the engine, and pulling it failed (%w); build or load it on that engine (docker build -t %s DIR, docker load), correct the name, or log in to its registry (docker login); from another machine's engine, deploy --copy-images sends it", ref, err, ref)
		}
		img, err = e.ResolveImage(ctx, c, ref)
	}
	if err != nil {
		if errors.Is(err, core.ErrNotFound) && pull == PullNever {
			return core.ImageRef{}, fmt.Errorf("image %s is not present and --pull=never: %w", ref, err)
		}
		return core.ImageRef{}, fmt.Errorf("resolve image %s: %w", ref, err)
	}
	return img, nil
}

// checkPrivileges refuses, before anything changes (R13), the options of s
// beyond Docker's defaults that e.PrivilegePolicy does not approve (nil:
// none is approved).
func (e *Engine) checkPrivileges(app string, s *core.ServiceSpec) error {
	if e.PrivilegePolicy != nil {
		return e.PrivilegePolicy(app, s)
	}
	return privilege.Refusal(app, "<state>/config.toml", privilege.Privileges{}, s)
}

// resolveBinds looks every bind of s up in e.BindPolicy (R13, R18.1,
// R19.1); nil policy refuses every bind. Errors wrap ErrInvalid unless the
// policy's error has a class. While this engine holds app's lock, each
// bind's answer is asked once (the policy reads <state>/config.toml).
func (e *Engine) ResolveBinds(c *steps.HeldChecks, app string, s *core.ServiceSpec) (map[string]string, error) {
	if len(s.Binds) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, b := range s.Binds {
		if e.BindPolicy == nil {
			return nil, fmt.Errorf("%w: bind %q refused: no bind policy is configured (add it to <state>/config.toml)", core.ErrInvalid, b.Name)
		}
		hp, ok := c.BindPath(b.Name)
		var err error
		if !ok {
			hp, err = e.BindPolicy(b.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("bind %q refused by policy: %w", b.Name, core.WithClass(err, core.ErrInvalid))
		}
		if hp == "" {
			return nil, fmt.Errorf("%w: bind %q: policy gives no host path", core.ErrInvalid, b.Name)
		}
		c.SetBindPath(b.Name, hp)
		out[b.Name] = hp
	}
	return out, nil
}

// preflightImageChecks is the image-config step of preflight, run before
// anything changes: every named service whose image is already present is
// checked for unmapped VOLUMEs and a "docker" readiness without a
// healthcheck (CheckImages). It returns the first failing service's name
// with the error. Images that preflight pulls later are checked by
// checkPinnedImage; an image this command's checks already resolved
// (SubmitChecked's pins) is checked as resolved, not resolved again.
func (d *deployRun) preflightImageChecks(ctx context.Context, names []string) (string, error) {
	for _, name := range names {
		spec, ok := d.rev.Spec.Service(name)
		if !ok {
			continue
		}
		if img, ok := d.e.peekPin(spec.Image, d.req.Pull); ok {
			if err := checkPinnedImage(d.app, spec, img); err != nil {
				return name, err
			}
			continue
		}
		if err := d.e.CheckImages(ctx, core.AppSpec{Name: d.app, Services: []core.ServiceSpec{*spec}}); err != nil {
			return name, err
		}
	}
	return "", nil
}

// checkPinnedImage applies the image-config checks to a pinned image.
func checkPinnedImage(app string, spec *core.ServiceSpec, img core.ImageRef) error {
	if err := steps.CheckImageVolumes(app, spec, img); err != nil {
		return err
	}
	return steps.CheckDockerReadiness(app, spec, img)
}

// classOf is the class a failed step reports (STYLE error classes): an
// interrupted command (ctx ended) is ErrInterrupted; otherwise err keeps
// the class it carries, and an unclassified cause is a state conflict.
func classOf(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && !errors.Is(err, core.ErrInterrupted) {
		return fmt.Errorf("%w: %w", core.ErrInterrupted, err)
	}
	return core.WithClass(err, core.ErrConflict)
}
