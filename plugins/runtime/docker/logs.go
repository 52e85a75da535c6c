package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/runtime/internal/logstream"
)

// Logs streams the container's log lines to fn, oldest first, each with the
// engine's timestamp, its stream ("stdout"/"stderr") and its text without
// the trailing newline. opts.Since (zero = all) and opts.Tail (0 = all)
// select lines; opts.Follow keeps streaming new lines. It returns nil when
// the logs end, ctx's error when ctx is done, fn's error unchanged when fn
// fails, and an error wrapping core.ErrNotFound for a missing container.
func (r *Runtime) Logs(ctx context.Context, id string, opts core.LogOptions, fn func(core.LogLine) error) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("logs of container %s", short(id))
	ins, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return r.classify(err, what)
	}
	lo := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Follow: opts.Follow}
	if !opts.Since.IsZero() {
		lo.Since = opts.Since.UTC().Format(time.RFC3339Nano)
	}
	if opts.Tail > 0 {
		lo.Tail = strconv.Itoa(opts.Tail)
	}
	rc, err := r.cli.ContainerLogs(ctx, id, lo)
	if err != nil {
		return r.classify(err, what)
	}
	defer rc.Close()

	err = logstream.Copy(rc, ins.Container.Config != nil && ins.Container.Config.Tty, fn)
	if fnErr, ok := logstream.Callback(err); ok {
		return fnErr
	}
	switch {
	case err == nil && opts.Follow && ctx.Err() != nil:
		return ctx.Err()
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return r.classify(err, what)
	}
}

// isNotFound reports whether err carries core.ErrNotFound.
func isNotFound(err error) bool { return errors.Is(err, core.ErrNotFound) }
