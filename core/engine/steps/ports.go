package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// PortChecker tells whether a publish address can be listened on now: it
// returns an error (typically "address already in use") when the edge
// could not bind it. The CLI implements it with a short-lived listen;
// nil skips the check.
type PortChecker func(ctx context.Context, proto, addr string) error

// publishOwners maps "tcp 0.0.0.0:9000" (and udp), and "host example.com"
// for public HTTP hosts, to "app/service" for everything ACTIVE routes.
func (e *Engine) PublishOwners(ctx context.Context) (map[string]string, error) {
	actives, unreadable, err := e.LoadActivesTolerant(ctx)
	if err != nil {
		return nil, err
	}
	owners := map[string]string{}
	if len(unreadable) > 0 && e.Traffic != nil {
		// An app whose record is unreadable still owns what it serves.
		if kept, err := e.keptRoutes(ctx, unreadable); err == nil {
			for _, r := range kept.HTTP {
				owners["host "+strings.ToLower(r.Host)] = r.App + "/" + r.Service
			}
			for _, r := range kept.TCP {
				owners["tcp "+r.Listen] = r.App + "/" + r.Service
			}
			for _, r := range kept.UDP {
				owners["udp "+r.Listen] = r.App + "/" + r.Service
			}
		}
	}
	for _, a := range actives {
		for name, s := range a.Services {
			if s == nil {
				continue
			}
			for _, h := range s.Spec.HTTP {
				if h.Public() && h.Host != "" {
					owners["host "+strings.ToLower(h.Host)] = a.App + "/" + name
				}
			}
			for _, t := range s.Spec.TCP {
				if t.Publish != "" {
					owners["tcp "+t.Publish] = a.App + "/" + name
				}
			}
			for _, u := range s.Spec.UDP {
				if u.Publish != "" {
					owners["udp "+u.Publish] = a.App + "/" + name
				}
			}
		}
	}
	return owners, nil
}

// checkPublish is R13's port reservation re-check for one service: every
// TCP and UDP publish address must either be held by this same service
// already (the edge keeps its listener across the switch) or be free: not
// routed to another app's service, and bindable now (PortCheck).
func (e *Engine) CheckPublish(ctx context.Context, app string, spec *core.ServiceSpec, owners map[string]string) error {
	return e.checkPublishWith(ctx, app, spec, owners, e.PortCheck)
}

// checkPublishOwners is checkPublish without the bind check.
func (e *Engine) checkPublishOwners(app string, spec *core.ServiceSpec, owners map[string]string) error {
	return e.checkPublishWith(context.Background(), app, spec, owners, nil)
}

func (e *Engine) checkPublishWith(ctx context.Context, app string, spec *core.ServiceSpec, owners map[string]string, portCheck PortChecker) error {
	check := func(proto, addr string) error {
		if addr == "" {
			return nil
		}
		owner, routed := owners[proto+" "+addr]
		if routed && owner == app+"/"+spec.Name {
			return nil
		}
		if routed {
			return fmt.Errorf("%w: publish %s/%s is already routed to %s", core.ErrConflict, addr, proto, owner)
		}
		if portCheck != nil {
			if err := portCheck(ctx, proto, addr); err != nil {
				return fmt.Errorf("%w: publish %s/%s: %w (free the port or choose another publish address)", core.ErrConflict, addr, proto, err)
			}
		}
		return nil
	}
	// Every conflict of the service at once, joined.
	var errs []error
	for _, h := range spec.HTTP {
		if !h.Public() || h.Host == "" {
			continue
		}
		// The edge routes a host to one service: another app's host is
		// refused here, before its table would be rejected (and block
		// every later apply). Within one app the manifest keeps hosts unique.
		if owner, ok := owners["host "+strings.ToLower(h.Host)]; ok && !strings.HasPrefix(owner, app+"/") {
			errs = append(errs, fmt.Errorf("%w: host %s is already routed to %s", core.ErrConflict, h.Host, owner))
		}
	}
	for _, t := range spec.TCP {
		if err := check("tcp", t.Publish); err != nil {
			errs = append(errs, err)
		}
	}
	for _, u := range spec.UDP {
		if err := check("udp", u.Publish); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckRoutesFree is R13's route reservation check of spec alone, as
// validate runs it: a public HTTP host or a TCP/UDP publish address that
// another app's ACTIVE routes is refused, one error per service joined
// (each wraps ErrConflict and names the owner). It reads the store and
// never writes it; whether a free port can be bound is not checked here
// (deploy checks it).
func (e *Engine) CheckRoutesFree(ctx context.Context, spec core.AppSpec) error {
	owners, err := e.PublishOwners(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for i := range spec.Services {
		s := &spec.Services[i]
		if err := e.checkPublishOwners(spec.Name, s, owners); err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}
