package system

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// The edge's access log as the CLI reads it (logs --access, edge logs
// --access, the dashboard).

// The edge's access log destinations other than a file, as gordon-edge
// spells them (edgeproxy.AccessLogOff, AccessLogStdout; a test holds them
// equal).
const (
	AccessLogOff    = "off"
	AccessLogStdout = "stdout"
)

// lastAccessDest is the access log destination of the edge serving
// stateDir (its status.json names it: "stdout", a file, or none: off),
// else of the last edge start (start.json): stdout unless one was given.
func lastAccessDest(stateDir string) string {
	if dest, ok := EdgeAccessLog(stateDir); ok {
		return dest
	}
	data, err := os.ReadFile(filepath.Join(stateDir, "edge", edgeStartFile))
	if err != nil {
		return AccessLogStdout
	}
	var last struct {
		AccessLog string `json:"access_log,omitempty"`
	}
	if json.Unmarshal(data, &last) != nil || last.AccessLog == "" {
		return AccessLogStdout
	}
	return last.AccessLog
}

// accessFilter passes the access log lines of app (every app when "") and
// service (every service when "") to w, dropping anything else; it is an
// io.Writer that takes arbitrary chunks.
type accessFilter struct {
	w            io.Writer
	app, service string
	partial      []byte
}

func (f *accessFilter) Write(p []byte) (int, error) {
	n := len(p)
	f.partial = append(f.partial, p...)
	for {
		i := bytes.IndexByte(f.partial, '\n')
		if i < 0 {
			break
		}
		line := f.partial[:i+1]
		if f.keep(line) {
			if _, err := f.w.Write(line); err != nil {
				return 0, err
			}
		}
		f.partial = f.partial[i+1:]
	}
	f.partial = append([]byte(nil), f.partial...)
	return n, nil
}

func (f *accessFilter) keep(line []byte) bool {
	var l struct {
		App     string `json:"app"`
		Service string `json:"service"`
		Method  string `json:"method"`
		Status  int    `json:"status"`
	}
	if json.Unmarshal(line, &l) != nil || l.Method == "" || l.Status == 0 {
		return false
	}
	return (f.app == "" || l.App == f.app) && (f.service == "" || l.Service == f.service)
}

// ShowAccessLog writes the access log lines of app/service ("": all) of
// the edge serving stateDir to out: from the edge container's stdout, or
// from the file the last `edge start` named (its rotated files are not
// read); tail is docker's --tail ("all" or a number of lines), follow
// waits for new lines until ctx ends. An edge whose access log is off is
// an error wrapping core.ErrInvalid that says how to turn it on.
func ShowAccessLog(ctx context.Context, api client.APIClient, stateDir, app, service string, follow bool, tail string, out io.Writer) error {
	filter := func(w io.Writer) io.Writer { return &accessFilter{w: w, app: app, service: service} }
	dest := lastAccessDest(stateDir)
	n, numeric := tailLines(tail)
	switch dest {
	case AccessLogOff:
		return fmt.Errorf("the edge's access log is off (edge start --access-log off); start it with --access-log stdout or a file: %w", core.ErrInvalid)
	case AccessLogStdout:
		if numeric {
			return docker.StreamLogsLast(ctx, api, docker.EdgeName, follow, n, out, nil, filter)
		}
		return docker.StreamLogs(ctx, api, docker.EdgeName, follow, tail, filter(out), nil)
	}
	return tailFile(ctx, dest, follow, tail, out, filter)
}

// tailLines reads --tail: a number of lines (numeric) or "all".
func tailLines(tail string) (n int, numeric bool) {
	n, err := strconv.Atoi(tail)
	return n, err == nil && n >= 0
}

// tailFile writes the last tail lines of path that filter passes ("all":
// every one) to out, then, with follow, what is appended (polled every
// 250 ms; a rotation reopens the file) until ctx ends.
func tailFile(ctx context.Context, path string, follow bool, tail string, out io.Writer, filter func(io.Writer) io.Writer) error {
	w := filter(out)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("access log %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("access log %s: %w", path, err)
	}
	if n, ok := tailLines(tail); ok {
		last := &docker.LastLines{N: n, W: out}
		if _, err := filter(last).Write(data); err != nil {
			return err
		}
		if err := last.Flush(); err != nil || !follow {
			return err
		}
	} else if _, err := w.Write(data); err != nil || !follow {
		return err
	}
	r := bufio.NewReader(f)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
		if _, err := io.Copy(w, r); err != nil {
			return err
		}
		if st, err := os.Stat(path); err == nil {
			if cur, err := f.Stat(); err == nil && !os.SameFile(st, cur) {
				nf, err := os.Open(path)
				if err == nil {
					_ = f.Close()
					f = nf
					r.Reset(f)
				}
			}
		}
	}
}
