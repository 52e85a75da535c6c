package steps

import (
	"context"
	"errors"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
)

// getSecret returns the service's secret name, else the app-wide one.
// Errors: neither is set → the service-level not-found error; a failed
// read of the app-wide secret → that error.
//
// While this engine holds app's lock, a value read is remembered for the
// rest of that hold (heldChecks).
func (e *Engine) getSecret(ctx context.Context, c *HeldChecks, app, service, name string) ([]byte, error) {
	if v, ok := c.secret(service, name); ok {
		return v, nil
	}
	v, err := e.readSecret(ctx, app, service, name)
	if err == nil {
		c.setSecret(service, name, v)
	}
	return v, err
}

// readSecret is getSecret without the memo.
func (e *Engine) readSecret(ctx context.Context, app, service, name string) ([]byte, error) {
	v, err := e.Store.GetSecret(ctx, app, service, name)
	if errors.Is(err, core.ErrNotFound) {
		av, aerr := e.Store.GetSecret(ctx, app, core.AppWideSecrets, name)
		switch {
		case aerr == nil:
			return av, nil
		case !errors.Is(aerr, core.ErrNotFound):
			return nil, aerr
		}
	}
	return v, err
}

// secretEnv loads the values of s's secrets: env secrets as a map, and the
// list of every value (for log redaction). A missing secret wraps
// ErrNotFound and names it.
func (e *Engine) SecretEnv(ctx context.Context, c *HeldChecks, app string, s *core.ServiceSpec) (map[string]string, []string, error) {
	env := map[string]string{}
	var values []string
	for _, ref := range s.Secrets {
		v, err := e.getSecret(ctx, c, app, s.Name, ref.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("app %s: service %s: secret %q: %w", app, s.Name, ref.Name, err)
		}
		values = append(values, string(v))
		if ref.As != "file" {
			env[ref.Env] = string(v)
		}
	}
	return env, values, nil
}

// secretFiles maps the file name of each of s's file secrets (its Env,
// else its Name) to its value; values are secretEnv's, one per s.Secrets
// entry in order. Nil when s has no file secret.
func SecretFiles(s *core.ServiceSpec, values []string) map[string][]byte {
	var files map[string][]byte
	for i, ref := range s.Secrets {
		if ref.As != "file" {
			continue
		}
		if files == nil {
			files = map[string][]byte{}
		}
		fn := ref.Env
		if fn == "" {
			fn = ref.Name
		}
		files[fn] = []byte(values[i])
	}
	return files
}

// checkSecretsSet reports the first secret of s that is not set, as one
// statement of what is missing and how to set it (wraps ErrNotFound).
func (e *Engine) CheckSecretsSet(ctx context.Context, c *HeldChecks, app string, s *core.ServiceSpec) error {
	for _, ref := range s.Secrets {
		if _, err := e.getSecret(ctx, c, app, s.Name, ref.Name); err != nil {
			if errors.Is(err, core.ErrNotFound) {
				return fmt.Errorf("%w: secret %q is not set (set it with: docker gordon secrets set %s %s %s, or for every service: docker gordon secrets set %s %s)",
					core.ErrNotFound, ref.Name, app, s.Name, ref.Name, app, ref.Name)
			}
			return fmt.Errorf("secret %q: %w", ref.Name, err)
		}
	}
	return nil
}
