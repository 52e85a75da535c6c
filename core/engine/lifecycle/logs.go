package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Logs streams the logs of the ACTIVE containers of app (every service in
// name order, or only service) to fn, which receives the service name with
// each line. Without opts.Follow each service's lines are delivered in
// turn; with Follow (several services) they are streamed concurrently and
// fn is never called concurrently. It ends when the logs end, ctx is done,
// or fn returns an error (returned as is).
//
// Errors: unknown app → ErrNotFound; never deployed → ErrConflict; service
// not in ACTIVE → ErrNotFound naming the app's services; a service
// without a container → ErrConflict; runtime errors
// wrapped with app/service/container.
func (e *Engine) Logs(ctx context.Context, app, service string, opts core.LogOptions, fn func(service string, line core.LogLine) error) error {
	if _, err := e.Store.LoadApp(ctx, app); err != nil {
		if errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("%w: logs: unknown app %q", core.ErrNotFound, app)
		}
		return fmt.Errorf("logs %s: load app: %w", app, err)
	}
	active, err := e.activeOrNeverDeployed(ctx, "logs", app)
	if err != nil {
		return err
	}
	names := steps.ActiveServiceNames(active)
	if service != "" {
		as := active.Services[service]
		if as == nil {
			return fmt.Errorf("%w: logs %s: app %s has no service %q (its services: %s)", core.ErrNotFound, app, app, service, strings.Join(names, ", "))
		}
		if as.Container == "" {
			return fmt.Errorf("%w: logs %s: service %q has no ACTIVE container", core.ErrConflict, app, service)
		}
		names = []string{service}
	}
	one := func(ctx context.Context, name string, emit func(core.LogLine) error) error {
		id := active.Services[name].Container
		if id == "" {
			return nil
		}
		if err := e.Runtime.Logs(ctx, id, opts, emit); err != nil {
			return fmt.Errorf("logs %s: service %s: container %s: %w", app, name, id, err)
		}
		return nil
	}
	if !opts.Follow || len(names) == 1 {
		for _, name := range names {
			name := name
			if err := one(ctx, name, func(l core.LogLine) error { return fn(name, l) }); err != nil {
				return err
			}
		}
		return nil
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = one(fctx, name, func(l core.LogLine) error {
				mu.Lock()
				defer mu.Unlock()
				return fn(name, l)
			})
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return ctx.Err()
}
