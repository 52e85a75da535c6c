package swarm

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/runtime/internal/logstream"
)

// Logs streams the instance's service logs (every task of it, oldest
// first as Swarm merges them) to fn, each line with its timestamp, stream
// and text; opts.Since, opts.Tail and opts.Follow select as for one
// container. It returns nil when the logs end, ctx's error when ctx is
// done, fn's error unchanged, and core.ErrNotFound for a missing instance.
func (r *Runtime) Logs(ctx context.Context, id string, opts core.LogOptions, fn func(core.LogLine) error) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("logs of swarm instance %s", short(id))
	svc, err := r.service(ctx, id, what)
	if err != nil {
		return err
	}
	lo := client.ServiceLogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Follow: opts.Follow}
	if !opts.Since.IsZero() {
		lo.Since = opts.Since.UTC().Format(time.RFC3339Nano)
	}
	if opts.Tail > 0 {
		lo.Tail = strconv.Itoa(opts.Tail)
	}
	rc, err := r.cli.ServiceLogs(ctx, id, lo)
	if err != nil {
		return r.classify(err, what)
	}
	defer rc.Close()
	cs := svc.Spec.TaskTemplate.ContainerSpec
	err = logstream.Copy(rc, cs != nil && cs.TTY, fn)
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
