package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
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

	stdout := &lineWriter{stream: "stdout", fn: fn}
	stderr := &lineWriter{stream: "stderr", fn: fn}
	if ins.Container.Config != nil && ins.Container.Config.Tty {
		_, err = io.Copy(stdout, rc)
	} else {
		_, err = stdcopy.StdCopy(stdout, stderr, rc)
	}
	if err == nil {
		if err = stdout.flush(); err == nil {
			err = stderr.flush()
		}
	}
	var ce callbackError
	switch {
	case err == nil && opts.Follow && ctx.Err() != nil:
		return ctx.Err()
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return ce.err
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return r.classify(err, what)
	}
}

// callbackError carries fn's error through stdcopy untouched.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// lineWriter splits one stream into lines "TIMESTAMP text\n" and hands them
// to fn.
type lineWriter struct {
	stream string
	fn     func(core.LogLine) error
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if err := w.emit(line); err != nil {
			return 0, err
		}
	}
}

func (w *lineWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	line := string(w.buf)
	w.buf = nil
	return w.emit(line)
}

func (w *lineWriter) emit(line string) error {
	ll := parseLogLine(line)
	ll.Stream = w.stream
	if err := w.fn(ll); err != nil {
		return callbackError{err}
	}
	return nil
}

// parseLogLine splits the RFC 3339 Nano timestamp prefix the engine adds
// (Timestamps: true) from the text; a line without one keeps a zero time.
func parseLogLine(line string) core.LogLine {
	line = strings.TrimSuffix(line, "\r")
	ts, text, ok := strings.Cut(line, " ")
	if ok {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return core.LogLine{Time: t.UTC(), Text: text}
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, line); err == nil { // timestamp of an empty line
		return core.LogLine{Time: t.UTC()}
	}
	return core.LogLine{Text: line}
}

// isNotFound reports whether err carries core.ErrNotFound.
func isNotFound(err error) bool { return errors.Is(err, core.ErrNotFound) }
