package coretest

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// MExec is the method name of Runtime.ExecContainer for Fail and Calls.
const MExec = "exec"

// ExecFunc scripts what a command run with Runtime.ExecContainer does: it
// may write lines with output and returns the command's exit code, or an
// error as the runtime would.
type ExecFunc func(ctx context.Context, id string, x core.ExecSpec, output func(string)) (int, error)

// ExecCall is one ExecContainer call that reached a running container.
type ExecCall struct {
	ID   string
	Spec core.ExecSpec
}

var _ core.ContainerExecer = (*Runtime)(nil)

// SetExec scripts ExecContainer (nil: every command exits 0 at once).
func (r *Runtime) SetExec(fn ExecFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exec = fn
}

// Execs returns the ExecContainer calls that reached a running container,
// in order.
func (r *Runtime) Execs() []ExecCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ExecCall(nil), r.execs...)
}

// ExecContainer implements core.ContainerExecer: a missing container wraps
// ErrNotFound, a container that is not running ErrConflict; otherwise the
// call is recorded (event exec, detail the argv joined by spaces) and the
// SetExec script runs. A script that outlives ctx is abandoned with ctx's
// error, as a real runtime abandons its wait.
func (r *Runtime) ExecContainer(ctx context.Context, id string, x core.ExecSpec, output func(string)) (int, error) {
	return r.runExec(ctx, id, x, output, func() ExecFunc { return r.exec })
}

// runExec is ExecContainer with the script pick returns (called under
// r.mu).
func (r *Runtime) runExec(ctx context.Context, id string, x core.ExecSpec, output func(string), pick func() ExecFunc) (int, error) {
	if err := r.begin(ctx, MExec, id); err != nil {
		return -1, err
	}
	r.mu.Lock()
	c, ok := r.cs[id]
	running := ok && c.state.Status == core.StatusRunning
	fn := pick()
	if running {
		r.execs = append(r.execs, ExecCall{ID: id, Spec: x})
	}
	r.mu.Unlock()
	if !ok {
		return -1, notFound(id)
	}
	if !running {
		return -1, fmt.Errorf("container %s is not running: %w", id, core.ErrConflict)
	}
	r.ev.AddDetail(MExec, id, strings.Join(x.Cmd, " "))
	if fn == nil {
		return 0, nil
	}
	if output == nil {
		output = func(string) {}
	}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := fn(ctx, id, x, output)
		done <- result{code, err}
	}()
	select {
	case res := <-done:
		return res.code, res.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// StreamFunc scripts what a command run with Runtime.ExecStream does: it
// may write its stdout to stdout and lines to stderr, and returns the
// command's exit code, or an error as the runtime would.
type StreamFunc func(ctx context.Context, id string, x core.ExecSpec, stdout io.Writer, stderr func(string)) (int, error)

var _ snapshot.StreamExecer = (*Runtime)(nil)

// SetStream scripts ExecStream (nil: every command writes nothing and
// exits 0).
func (r *Runtime) SetStream(fn StreamFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stream = fn
}

// ExecStream implements snapshot.StreamExecer as ExecContainer does
// (same checks, recorded in Execs and as event exec), running the
// SetStream script.
func (r *Runtime) ExecStream(ctx context.Context, id string, x core.ExecSpec, stdout io.Writer, stderr func(string)) (int, error) {
	if stderr == nil {
		stderr = func(string) {}
	}
	return r.runExec(ctx, id, x, nil, func() ExecFunc {
		fn := r.stream
		return func(ctx context.Context, id string, x core.ExecSpec, _ func(string)) (int, error) {
			if fn == nil {
				return 0, nil
			}
			return fn(ctx, id, x, stdout, stderr)
		}
	})
}
