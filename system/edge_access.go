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
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// The edge's access log destinations and rotation defaults, as gordon-edge
// spells them (edgeproxy.AccessLogOff, AccessLogStdout,
// DefaultAccessLogMaxSize, DefaultAccessLogKeep; a test holds them equal).
// They are repeated here rather than imported: importing edgeproxy links
// the whole proxy and Prometheus' client into the CLI, whose package init
// every docker-gordon process start pays.
const (
	AccessLogOff            = "off"
	AccessLogStdout         = "stdout"
	DefaultAccessLogMaxSize = 100 << 20
	DefaultAccessLogKeep    = 5
)

// AccessLogOptions are the edge's access log settings (gordon-edge
// --access-log, --access-log-max-size in bytes, --access-log-keep files).
type AccessLogOptions struct {
	// Dest is AccessLogOff, AccessLogStdout or an absolute file path under
	// the state directory.
	Dest    string
	MaxSize int64
	Keep    int
}

// edgeStartAccess is what start.json remembers of them (empty: stdout,
// the default).
type edgeStartAccess struct {
	AccessLog     string `json:"access_log,omitempty"`
	AccessLogMax  int64  `json:"access_log_max_size,omitempty"`
	AccessLogKeep *int   `json:"access_log_keep,omitempty"`
}

// resolve takes the settings not given now from the last start.
func (o *AccessLogOptions) resolve(changed func(string) bool, last edgeStartAccess) {
	if !changed("access-log") && last.AccessLog != "" {
		o.Dest = last.AccessLog
	}
	if !changed("access-log-max-size") && last.AccessLogMax > 0 {
		o.MaxSize = last.AccessLogMax
	}
	if !changed("access-log-keep") && last.AccessLogKeep != nil {
		o.Keep = *last.AccessLogKeep
	}
}

func (o *AccessLogOptions) remembered() edgeStartAccess {
	r := edgeStartAccess{}
	if o.Dest != AccessLogStdout {
		r.AccessLog = o.Dest
	}
	if o.MaxSize != DefaultAccessLogMaxSize {
		r.AccessLogMax = o.MaxSize
	}
	if o.Keep != DefaultAccessLogKeep {
		keep := o.Keep
		r.AccessLogKeep = &keep
	}
	return r
}

// withEdgeAccessLog adds the access log flags to the edge unit (none for
// the default, stdout, so an edge started before keeps its flags). A file
// must be an absolute path under the state directory, the only host path
// the edge container sees.
func withEdgeAccessLog(u *docker.Unit, o *AccessLogOptions, stateDir string) error {
	switch o.Dest {
	case AccessLogStdout:
	case AccessLogOff:
		u.Cmd = append(u.Cmd, "--access-log", AccessLogOff)
	default:
		p := filepath.Clean(o.Dest)
		rel, err := filepath.Rel(stateDir, p)
		if !filepath.IsAbs(p) || err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("--access-log %q: want off, stdout or an absolute file path under the state directory %s (the edge container sees only that): %w", o.Dest, stateDir, core.ErrInvalid)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("--access-log: %w", err)
		}
		o.Dest = p
		u.Cmd = append(u.Cmd, "--access-log", p)
	}
	if o.MaxSize <= 0 || o.Keep < 0 {
		return fmt.Errorf("--access-log-max-size must be positive and --access-log-keep 0 or more: %w", core.ErrInvalid)
	}
	if o.MaxSize != DefaultAccessLogMaxSize {
		u.Cmd = append(u.Cmd, "--access-log-max-size", strconv.FormatInt(o.MaxSize, 10))
	}
	if o.Keep != DefaultAccessLogKeep {
		u.Cmd = append(u.Cmd, "--access-log-keep", strconv.Itoa(o.Keep))
	}
	return nil
}

// lastAccessDest is the access log destination of the edge serving
// stateDir (its status.json names it: "stdout", a file, or none: off),
// else of the last edge start (start.json): stdout unless one was given.
func lastAccessDest(stateDir string) string {
	if dest, ok := EdgeAccessLog(stateDir); ok {
		return dest
	}
	last, ok := loadEdgeStart(stateDir)
	if !ok || last.AccessLog == "" {
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

// ShowAccessLog writes the edge's access log lines of app/service ("":
// all) to out: from the edge container's stdout, or from the file the
// last `edge start` named (its rotated files are not read); tail is
// docker's --tail ("all" or a number of lines), follow waits for new
// lines until ctx ends. An access log turned off is core.ErrInvalid.
func ShowAccessLog(ctx context.Context, env Env, app, service string, follow bool, tail string, out io.Writer) error {
	filter := &accessFilter{w: out, app: app, service: service}
	dest := lastAccessDest(env.StateDir)
	switch dest {
	case AccessLogOff:
		return fmt.Errorf("the edge's access log is off (edge start --access-log off); start it with --access-log stdout or a file: %w", core.ErrInvalid)
	case AccessLogStdout:
		return docker.StreamLogs(ctx, env.API, docker.EdgeName, follow, tail, filter, nil)
	}
	return tailFile(ctx, dest, follow, tail, filter)
}

// tailFile writes the last tail lines of path ("all": every line) to w,
// then, with follow, what is appended (polled every 250 ms; a rotation
// reopens the file) until ctx ends.
func tailFile(ctx context.Context, path string, follow bool, tail string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("access log %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("access log %s: %w", path, err)
	}
	if n, err := strconv.Atoi(tail); err == nil {
		lines := bytes.SplitAfter(data, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		data = bytes.Join(lines[max(len(lines)-n, 0):], nil)
	}
	if _, err := w.Write(data); err != nil || !follow {
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
