package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

var _ core.ContainerExecer = (*Runtime)(nil)

// execInspectEvery is how often ExecContainer asks for the exit code once
// the command's output has ended.
const execInspectEvery = 50 * time.Millisecond

// maxExecLine bounds one output line passed on (longer lines are split).
const maxExecLine = 4096

// ExecContainer implements core.ContainerExecer (SPEC R72 hooks) with the
// engine's exec API: create, attach stdout and stderr (no terminal, no
// stdin), pass each output line to output, then read the exit code. When
// ctx ends first it returns ctx's error; the engine has no way to stop an
// exec, so the command may go on running in the container. A missing
// container wraps core.ErrNotFound, a stopped one core.ErrConflict.
func (r *Runtime) ExecContainer(ctx context.Context, id string, x core.ExecSpec, output func(string)) (int, error) {
	lw := &execLines{fn: output}
	defer lw.flush()
	return r.exec(ctx, id, x, lw, lw, false)
}

// ExecStream implements the engine's snapshot.StreamExecer ([services.X.backup]
// command): as ExecContainer, with the command's stdout written to stdout
// byte for byte and its stderr passed to stderr line by line. A failed
// write to stdout ends the stream with that error.
func (r *Runtime) ExecStream(ctx context.Context, id string, x core.ExecSpec, stdout io.Writer, stderr func(string)) (int, error) {
	lw := &execLines{fn: stderr}
	defer lw.flush()
	return r.exec(ctx, id, x, stdout, lw, true)
}

// exec runs x in container id with the engine's exec API: create, attach
// stdout and stderr (no terminal, no stdin), demultiplex them into stdout
// and stderr, then read the exit code. With strict, an output stream cut
// short (a failed write, a broken connection) is an error: the output is
// incomplete.
func (r *Runtime) exec(ctx context.Context, id string, x core.ExecSpec, stdout, stderr io.Writer, strict bool) (int, error) {
	if len(x.Cmd) == 0 {
		return -1, fmt.Errorf("%w: exec in container %s: no command", core.ErrInvalid, short(id))
	}
	if err := r.connect(ctx); err != nil {
		return -1, err
	}
	what := fmt.Sprintf("exec %q in container %s", strings.Join(x.Cmd, " "), short(id))
	created, err := r.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		Cmd: x.Cmd, Env: x.Env, User: x.User, WorkingDir: x.WorkingDir, Privileged: x.Privileged,
		AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return -1, r.classify(ctxErr(ctx, err), what)
	}
	att, err := r.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return -1, r.classify(ctxErr(ctx, err), what)
	}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, att.Reader)
		copied <- err
	}()
	var cerr error
	select {
	case cerr = <-copied:
	case <-ctx.Done():
		att.Close()
		<-copied
		return -1, ctx.Err()
	}
	att.Close()
	if cerr != nil && strict {
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		return -1, fmt.Errorf("%s: its output: %w", what, cerr)
	}
	for {
		ins, err := r.cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return -1, r.classify(ctxErr(ctx, err), what)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(execInspectEvery):
		}
	}
}

// ctxErr prefers ctx's error when ctx has ended (an engine call cut short
// by the caller's deadline is that deadline, not an engine failure).
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// execLines passes every complete line written to it to fn (without the
// newline or a trailing carriage return), a line longer than maxExecLine
// in pieces of at most that; flush passes what remains.
type execLines struct {
	fn  func(string)
	buf bytes.Buffer
}

func (w *execLines) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			for w.buf.Len() > maxExecLine {
				w.emit(w.buf.Next(maxExecLine))
			}
			return len(p), nil
		}
		if i > maxExecLine {
			w.emit(w.buf.Next(maxExecLine))
			continue
		}
		w.emit(w.buf.Next(i + 1)[:i])
	}
}

func (w *execLines) flush() {
	if w.buf.Len() > 0 {
		w.emit(w.buf.Next(w.buf.Len()))
	}
}

// emit passes one line on, its invalid UTF-8 replaced (a line is text:
// it crosses the plugin protocol as a string).
func (w *execLines) emit(line []byte) {
	if w.fn != nil {
		w.fn(strings.ToValidUTF8(strings.TrimSuffix(string(line), "\r"), "\uFFFD"))
	}
}
