package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// ServingContainer returns the exact container that serves service of app
// as ACTIVE records it, for `docker gordon exec` (R2: exact IDs only).
// instance is 1-based: the serving generation's instance number (1 for a
// generation of one container). It reads only; no lock is taken.
//
// Errors: an unknown app, a service ACTIVE does not name (the error names
// the app's serving services) or an instance the generation does not have
// wrap ErrNotFound; a stopped app or a service without a serving container
// wraps ErrConflict and says how to start it; instance < 1 wraps
// ErrInvalid.
func (e *Engine) ServingContainer(ctx context.Context, app, service string, instance int) (string, error) {
	if instance < 1 {
		return "", fmt.Errorf("%w: exec %s %s: --instance %d: instances are numbered from 1", core.ErrInvalid, app, service, instance)
	}
	active, err := e.Store.LoadActive(ctx, app)
	if errors.Is(err, core.ErrNotFound) {
		if _, aerr := e.Store.LoadApp(ctx, app); errors.Is(aerr, core.ErrNotFound) {
			return "", fmt.Errorf("%w: exec: app %q not found (deploy it with: docker gordon deploy -f FILE)", core.ErrNotFound, app)
		}
		return "", fmt.Errorf("%w: exec %s: the app serves nothing (never deployed, or removed)", core.ErrConflict, app)
	}
	if err != nil {
		return "", fmt.Errorf("exec %s: load ACTIVE: %w", app, err)
	}
	in, err := e.Store.LoadIntent(ctx, app)
	if err != nil {
		return "", fmt.Errorf("exec %s: load intent: %w", app, err)
	}
	if in.Stopped {
		return "", fmt.Errorf("%w: exec %s: the app is stopped; start it with: docker gordon start %s", core.ErrConflict, app, app)
	}
	s := active.Services[service]
	if s == nil {
		names := slices.Sorted(func(yield func(string) bool) {
			for n, a := range active.Services {
				if a != nil && a.Container != "" && !yield(n) {
					return
				}
			}
		})
		return "", fmt.Errorf("%w: exec %s: no serving service %q (serving: %s)", core.ErrNotFound, app, service, strings.Join(names, ", "))
	}
	if s.Container == "" {
		return "", fmt.Errorf("%w: exec %s %s: the service has no serving container; start it with: docker gordon start %s", core.ErrConflict, app, service, app)
	}
	if instance != 1 {
		return "", fmt.Errorf("%w: exec %s %s: --instance %d: the serving generation has 1 instance", core.ErrNotFound, app, service, instance)
	}
	return s.Container, nil
}
