package jobs

import (
	"context"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
)

// Logs writes the output of the last run of app's job to fn, secret
// values redacted, and returns that run's op: once the run ended, the
// output its op kept (the last OutputMax bytes; opts.Tail applies); while
// it runs, its container's log (followed until the run ends with
// opts.Follow). A job that never ran wraps ErrNotFound.
func (e *Engine) Logs(ctx context.Context, app, job string, opts core.LogOptions, fn func(core.LogLine) error) (core.Operation, error) {
	op, err := e.LastRunOf(ctx, app, job)
	if err != nil {
		return op, err
	}
	id := Container(op)
	if op.Terminal() || id == "" {
		lines := Output(op)
		if opts.Tail > 0 && len(lines) > opts.Tail {
			lines = lines[len(lines)-opts.Tail:]
		}
		for _, l := range lines {
			if err := fn(core.LogLine{Time: op.FinishedAt, Stream: "stdout", Text: l}); err != nil {
				return op, err
			}
		}
		return op, nil
	}
	secrets := e.runSecrets(ctx, app, op)
	err = e.Runtime.Logs(ctx, id, core.LogOptions{Since: opts.Since, Tail: opts.Tail, Follow: opts.Follow}, func(l core.LogLine) error {
		l.Text = steps.DpRedact(l.Text, secrets)
		return fn(l)
	})
	if err != nil {
		return op, fmt.Errorf("app %s job %s: output of the running container %s: %w", app, job, shortID(id), err)
	}
	return op, nil
}

// runSecrets are the secret values of the service a running job op runs
// as, for redaction (none when they cannot be read).
func (e *Engine) runSecrets(ctx context.Context, app string, op core.Operation) []string {
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil {
		return nil
	}
	as := active.Services[op.Steps[0].Service]
	if as == nil {
		return nil
	}
	spec := as.Spec
	_, values, err := e.SecretEnv(ctx, nil, app, &spec)
	if err != nil {
		return nil
	}
	return values
}
