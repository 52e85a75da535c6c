package system

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// The edge's access log rotation defaults, as gordon-edge spells them
// (edgeproxy.DefaultAccessLogMaxSize, DefaultAccessLogKeep; a test holds
// them equal; the destinations are in accesslog.go). They are repeated
// here rather than imported: importing edgeproxy links the whole proxy
// and Prometheus' client into the CLI, whose package init every
// docker-gordon process start pays.
const (
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
