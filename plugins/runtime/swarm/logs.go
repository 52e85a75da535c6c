package swarm

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
	stdout, stderr := &lineWriter{stream: "stdout", fn: fn}, &lineWriter{stream: "stderr", fn: fn}
	if cs := svc.Spec.TaskTemplate.ContainerSpec; cs != nil && cs.TTY {
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

// lineWriter splits one stream into "TIMESTAMP text" lines for fn.
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
	ll := core.LogLine{Stream: w.stream, Text: strings.TrimSuffix(line, "\r")}
	if ts, text, ok := strings.Cut(ll.Text, " "); ok {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			ll.Time, ll.Text = t.UTC(), text
		}
	} else if t, err := time.Parse(time.RFC3339Nano, ll.Text); err == nil {
		ll.Time, ll.Text = t.UTC(), ""
	}
	if err := w.fn(ll); err != nil {
		return callbackError{err}
	}
	return nil
}
