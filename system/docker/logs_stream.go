package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// StreamLogs is Logs with a choice of streams: the container's stdout
// goes to out and its stderr to errw, and a nil writer leaves that stream
// out (the edge writes its access log on stdout and its own log on
// stderr). tail is "all" or a number of lines. Errors: the container is
// not there (core.ErrNotFound), or the engine failed.
func StreamLogs(ctx context.Context, api client.APIClient, name string, follow bool, tail string, out, errw io.Writer) error {
	return streamLogs(ctx, api, name, follow, tail, "", out, errw)
}

// StreamLogsLast is StreamLogs whose tail counts what reaches the writers,
// per stream: the last n lines written to out (after filter, when not nil,
// which wraps out: an access log filter) and the last n of errw, not the
// container's last n lines of both streams together (so edge logs --tail 5
// shows the edge's own last 5 lines even when access log lines came after).
// With follow it then streams what was logged since it began reading (a
// line logged while it read may show twice).
func StreamLogsLast(ctx context.Context, api client.APIClient, name string, follow bool, n int, out, errw io.Writer, filter func(io.Writer) io.Writer) error {
	if filter == nil {
		filter = func(w io.Writer) io.Writer { return w }
	}
	since := time.Now().UTC().Format(time.RFC3339Nano)
	var lo, le *LastLines
	var o, e io.Writer
	if out != nil {
		lo = &LastLines{N: n, W: out}
		o = filter(lo)
	}
	if errw != nil {
		le = &LastLines{N: n, W: errw}
		e = le
	}
	if err := streamLogs(ctx, api, name, false, "all", "", o, e); err != nil {
		return err
	}
	for _, l := range []*LastLines{lo, le} {
		if l != nil {
			if err := l.Flush(); err != nil {
				return err
			}
		}
	}
	if !follow {
		return nil
	}
	if out != nil {
		out = filter(out)
	}
	return streamLogs(ctx, api, name, true, "all", since, out, errw)
}

// LastLines keeps the last N complete lines written to it (a partial last
// line counts as one); Flush writes them to W.
type LastLines struct {
	N       int
	W       io.Writer
	lines   [][]byte
	partial []byte
}

// Write implements io.Writer.
func (l *LastLines) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, append([]byte(nil), l.partial[:i+1]...))
		if len(l.lines) > l.N {
			l.lines = l.lines[len(l.lines)-l.N:]
		}
		l.partial = l.partial[i+1:]
	}
	l.partial = append([]byte(nil), l.partial...)
	return len(p), nil
}

// Flush writes the kept lines to W.
func (l *LastLines) Flush() error {
	lines := l.lines
	if len(l.partial) > 0 {
		lines = append(lines, l.partial)
	}
	if len(lines) > l.N {
		lines = lines[len(lines)-l.N:]
	}
	for _, line := range lines {
		if _, err := l.W.Write(line); err != nil {
			return err
		}
	}
	l.lines, l.partial = nil, nil
	return nil
}

func streamLogs(ctx context.Context, api client.APIClient, name string, follow bool, tail, since string, out, errw io.Writer) error {
	cur, err := inspectUnit(ctx, api, name, "")
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("%s: no such system container: %w", name, core.ErrNotFound)
	}
	rc, err := api.ContainerLogs(ctx, cur.ID, client.ContainerLogsOptions{ShowStdout: out != nil, ShowStderr: errw != nil, Follow: follow, Tail: tail, Since: since})
	if err != nil {
		return fmt.Errorf("%s: logs: %w", name, classify(err))
	}
	defer rc.Close()
	if out == nil {
		out = io.Discard
	}
	if errw == nil {
		errw = io.Discard
	}
	if _, err := stdcopy.StdCopy(out, errw, rc); err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: logs: %w", name, err)
	}
	return nil
}
