package deploy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// CheckDeployable runs every check that can refuse a deploy of spec before
// anything of it is stored (SPEC R12 "a refusal changes nothing"): the
// engine answers (Info), each service's image resolves (pulling per the
// pull policy, "" = missing), its secrets are set, its binds and privileged options are approved,
// a custom readiness plugin accepts its config, the engine can grant its
// ulimits (checkUlimits), no public host or publish
// address is routed to another app (or is unbindable), the traffic backend
// serves this state directory (checkTraffic), and no volume it
// would mount is owned by another app or incarnation (R13). It reads the
// store and never writes it.
//
// Errors: the first refusal, naming the service, wrapping its class:
// ErrUnavailable (engine), ErrNotFound (image, secret), ErrInvalid (bind,
// readiness config, ulimits), ErrConflict (host, port, volume owner).
func (e *Engine) CheckDeployable(ctx context.Context, spec core.AppSpec, pull string) error {
	app := spec.Name
	if app == "" {
		return fmt.Errorf("%w: app spec has no name", core.ErrInvalid)
	}
	// Under the deploy's lock (Submission.Prepare), the hold's memo.
	c := steps.HeldOf(ctx)
	if _, err := e.Runtime.Info(ctx); err != nil {
		return fmt.Errorf("deploy %s: container engine: %w", app, core.WithClass(err, core.ErrUnavailable))
	}
	if err := e.checkTraffic(ctx, c, app); err != nil {
		return fmt.Errorf("deploy %s: %w", app, err)
	}
	owners, err := e.PublishOwners(ctx)
	if err != nil {
		return fmt.Errorf("deploy %s: %w", app, err)
	}
	incarnation := ""
	if info, err := e.Store.LoadApp(ctx, app); err == nil {
		incarnation = info.Incarnation
	} else if !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("deploy %s: %w", app, err)
	}
	if err := e.CheckAppOwner(ctx, app, incarnation); err != nil {
		return fmt.Errorf("deploy %s: %w", app, err)
	}
	start := time.Now()
	for _, name := range specServiceNames(spec) {
		s, _ := spec.Service(name)
		refuse := func(err error) error {
			return fmt.Errorf("deploy %s: service %s: %w", app, name, err)
		}
		if err := e.checkPrivileges(app, s); err != nil {
			return refuse(err)
		}
		if e.Readiness != nil && e.Readiness.Probes != nil {
			if err := readiness.ValidatePluginReadiness(ctx, e.Readiness.Probes, app, []core.ServiceSpec{*s}); err != nil {
				return refuse(err)
			}
		}
		img, err := e.pinImage(ctx, c, app, name, s.Image, pull, start)
		if err != nil {
			return refuse(core.WithClass(err, core.ErrUnavailable))
		}
		e.rememberPin(s.Image, pull, img)
		if err := e.CheckUlimits(ctx, app, s, img); err != nil {
			return refuse(err)
		}
		if err := e.CheckSecretsSet(ctx, c, app, s); err != nil {
			return refuse(err)
		}
		if _, err := e.ResolveBinds(c, app, s); err != nil {
			return refuse(err)
		}
		if err := e.CheckPublish(ctx, app, s, owners); err != nil {
			return refuse(err)
		}
		if err := e.CheckVolumeOwners(ctx, app, incarnation, s); err != nil {
			return refuse(err)
		}
	}
	return nil
}

// SubmitChecked is CheckDeployable followed by SubmitRevision: a manifest
// that would be refused is never stored (no app record, revision or
// DESIRED is written).
func (e *Engine) SubmitChecked(ctx context.Context, spec core.AppSpec, sourceSHA256, pull string) (core.Revision, error) {
	if err := e.CheckDeployable(ctx, spec, pull); err != nil {
		return core.Revision{}, err
	}
	return e.SubmitRevision(ctx, spec, sourceSHA256)
}

// specServiceNames lists spec's services in name order.
func specServiceNames(spec core.AppSpec) []string {
	names := make([]string, 0, len(spec.Services))
	for _, s := range spec.Services {
		names = append(names, s.Name)
	}
	return steps.SortedServiceNames(names)
}

// checkTraffic asks the traffic backend for its status before anything is
// created: a backend that answers with a conflict (an edge serving another
// state directory) refuses the deploy. A backend that cannot be reached is
// not a refusal here (the CLI requires a live edge before it starts; the
// switch would fail cleanly).
func (e *Engine) checkTraffic(ctx context.Context, c *steps.HeldChecks, app string) error {
	if e.Traffic == nil {
		return nil
	}
	if _, err := e.TrafficStatus(ctx, c); err != nil && errors.Is(err, core.ErrConflict) {
		return fmt.Errorf("traffic backend: %w", err)
	}
	return nil
}

// rememberPin keeps the resolution CheckDeployable made of ref under pull,
// so the deploy's own preflight in the same command neither resolves nor
// pulls it again (an image pulled under --pull=always is pulled once).
func (e *Engine) rememberPin(ref, pull string, img core.ImageRef) {
	e.PinMu.Lock()
	defer e.PinMu.Unlock()
	if e.Pins == nil {
		e.Pins = map[string]core.ImageRef{}
	}
	e.Pins[pull+"\x00"+ref] = img
}

// peekPin returns a resolution rememberPin kept, leaving it in place.
func (e *Engine) peekPin(ref, pull string) (core.ImageRef, bool) {
	e.PinMu.Lock()
	defer e.PinMu.Unlock()
	img, ok := e.Pins[pull+"\x00"+ref]
	return img, ok
}

// takePin returns (and forgets) a resolution rememberPin kept.
func (e *Engine) takePin(ref, pull string) (core.ImageRef, bool) {
	e.PinMu.Lock()
	defer e.PinMu.Unlock()
	img, ok := e.Pins[pull+"\x00"+ref]
	delete(e.Pins, pull+"\x00"+ref)
	return img, ok
}
