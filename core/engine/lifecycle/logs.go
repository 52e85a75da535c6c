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

// logSource is one container whose lines Logs delivers: instance is
// 1-based when its service runs several instances, else 0.
type logSource struct {
	service  string
	instance int
	id       string
}

// Logs streams the logs of the serving containers of app (every service in
// name order, or only service; every instance of each, or only
// opts.Instance) to fn, which receives the service name with each line;
// LogLine.Instance names the instance (1-based) when the service runs
// more than one. Without opts.Follow each container's lines are delivered
// in turn (instances in the order status lists them); with Follow
// (several containers) they are streamed concurrently and fn is never
// called concurrently. It ends when the logs end, ctx is done, or fn
// returns an error (returned as is).
//
// Errors: unknown app → ErrNotFound; never deployed → ErrConflict; service
// not serving → ErrNotFound naming the app's services; a service without
// a container → ErrConflict; opts.Instance beyond the service's instances
// → ErrNotFound naming the count (ErrInvalid for an instance without
// --service); runtime errors wrapped with app/service/container.
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
			return fmt.Errorf("%w: logs %s: service %q has no running container; start it with: docker gordon start %s", core.ErrConflict, app, service, app)
		}
		names = []string{service}
	}
	if opts.Instance < 0 {
		return fmt.Errorf("%w: logs %s: --instance %d: instances are numbered from 1", core.ErrInvalid, app, opts.Instance)
	}
	if opts.Instance > 0 && service == "" && len(names) != 1 {
		return fmt.Errorf("%w: logs %s: --instance needs --service (the app runs %s)", core.ErrInvalid, app, strings.Join(names, ", "))
	}
	var srcs []logSource
	for _, name := range names {
		all := active.Services[name].Instances()
		if opts.Instance > len(all) {
			return fmt.Errorf("%w: logs %s %s: --instance %d: the service runs %d instance(s); pick one from 1 to %d", core.ErrNotFound, app, name, opts.Instance, len(all), len(all))
		}
		for i, in := range all {
			if opts.Instance > 0 && opts.Instance != i+1 {
				continue
			}
			n := 0
			if len(all) > 1 {
				n = i + 1
			}
			srcs = append(srcs, logSource{service: name, instance: n, id: in.Container})
		}
	}
	one := func(ctx context.Context, src logSource, emit func(core.LogLine) error) error {
		if err := e.Runtime.Logs(ctx, src.id, opts, func(l core.LogLine) error {
			l.Instance = src.instance
			return emit(l)
		}); err != nil {
			return fmt.Errorf("logs %s: service %s: container %.12s: %w", app, src.service, src.id, err)
		}
		return nil
	}
	if !opts.Follow || len(srcs) == 1 {
		for _, src := range srcs {
			if err := one(ctx, src, func(l core.LogLine) error { return fn(src.service, l) }); err != nil {
				return err
			}
		}
		return nil
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(srcs))
	for i, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = one(fctx, src, func(l core.LogLine) error {
				mu.Lock()
				defer mu.Unlock()
				return fn(src.service, l)
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
