package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// The edge's access log destinations and rotation defaults, as gordon-edge
// spells them (edgeproxy.AccessLogOff, AccessLogStdout,
// DefaultAccessLogMaxSize, DefaultAccessLogKeep; a test holds them equal).
// They are repeated here rather than imported: importing edgeproxy links
// the whole proxy and Prometheus' client into the CLI, whose package init
// every docker-gordon process start pays.
const (
	accessLogOff            = "off"
	accessLogStdout         = "stdout"
	defaultAccessLogMaxSize = 100 << 20
	defaultAccessLogKeep    = 5
)

// edgeAccessFlags are the access log flags of `edge start` and `system
// start` (gordon-edge --access-log).
type edgeAccessFlags struct {
	dest    string
	maxSize int64
	keep    int
}

// edgeStartAccess is what start.json remembers of them (empty: stdout,
// the default).
type edgeStartAccess struct {
	AccessLog     string `json:"access_log,omitempty"`
	AccessLogMax  int64  `json:"access_log_max_size,omitempty"`
	AccessLogKeep *int   `json:"access_log_keep,omitempty"`
}

func (f *edgeAccessFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dest, "access-log", accessLogStdout, "the edge's access log, one JSON line per HTTP request: off, stdout (read with edge logs --access), or a file under the state directory, rotated by size; default: the last start's")
	cmd.Flags().Int64Var(&f.maxSize, "access-log-max-size", defaultAccessLogMaxSize, "size in bytes at which an --access-log file is rotated (FILE becomes FILE.1)")
	cmd.Flags().IntVar(&f.keep, "access-log-keep", defaultAccessLogKeep, "rotated --access-log files kept (FILE.1 .. FILE.N)")
}

// resolve takes the flags not given from the last start.
func (f *edgeAccessFlags) resolve(cmd *cobra.Command, last edgeStartAccess) {
	if !cmd.Flags().Changed("access-log") && last.AccessLog != "" {
		f.dest = last.AccessLog
	}
	if !cmd.Flags().Changed("access-log-max-size") && last.AccessLogMax > 0 {
		f.maxSize = last.AccessLogMax
	}
	if !cmd.Flags().Changed("access-log-keep") && last.AccessLogKeep != nil {
		f.keep = *last.AccessLogKeep
	}
}

func (f *edgeAccessFlags) remembered() edgeStartAccess {
	r := edgeStartAccess{}
	if f.dest != accessLogStdout {
		r.AccessLog = f.dest
	}
	if f.maxSize != defaultAccessLogMaxSize {
		r.AccessLogMax = f.maxSize
	}
	if f.keep != defaultAccessLogKeep {
		keep := f.keep
		r.AccessLogKeep = &keep
	}
	return r
}

// withEdgeAccessLog adds the access log flags to the edge unit (none for
// the default, stdout, so an edge started before keeps its flags). A file
// must be an absolute path under the state directory, the only host path
// the edge container sees.
func withEdgeAccessLog(u *docker.Unit, f *edgeAccessFlags, stateDir string) error {
	switch f.dest {
	case accessLogStdout:
	case accessLogOff:
		u.Cmd = append(u.Cmd, "--access-log", accessLogOff)
	default:
		p := filepath.Clean(f.dest)
		rel, err := filepath.Rel(stateDir, p)
		if !filepath.IsAbs(p) || err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("--access-log %q: want off, stdout or an absolute file path under the state directory %s (the edge container sees only that): %w", f.dest, stateDir, core.ErrInvalid)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("--access-log: %w", err)
		}
		f.dest = p
		u.Cmd = append(u.Cmd, "--access-log", p)
	}
	if f.maxSize <= 0 || f.keep < 0 {
		return fmt.Errorf("--access-log-max-size must be positive and --access-log-keep 0 or more: %w", core.ErrInvalid)
	}
	if f.maxSize != defaultAccessLogMaxSize {
		u.Cmd = append(u.Cmd, "--access-log-max-size", strconv.FormatInt(f.maxSize, 10))
	}
	if f.keep != defaultAccessLogKeep {
		u.Cmd = append(u.Cmd, "--access-log-keep", strconv.Itoa(f.keep))
	}
	return nil
}

// showAccessLog is system.ShowAccessLog on the CLI's engine and state
// directory.
func showAccessLog(ctx context.Context, env *cliEnv, app, service string, follow bool, tail string, out io.Writer) error {
	return system.ShowAccessLog(ctx, env.dockerCli.Client(), env.opts.stateDir, app, service, follow, tail, out)
}

// newEdgeLogsCommand is `edge logs [-f] [--tail N] [--access [--app A]]`:
// the edge's own log (its stderr), or with --access its access log.
func newEdgeLogsCommand(env *cliEnv) *cobra.Command {
	var follow, access bool
	var tail string
	cmd := &cobra.Command{
		Use:   "logs [-f] [--tail N] [--access]",
		Short: "Show the logs of the gordon-edge system container (--access: its access log)",
		Long: `Show the edge's own log (route tables applied, errors). With --access show
its access log instead: one JSON line per HTTP request, from the edge
container's output or from the file edge start --access-log named.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tail != "all" {
				if n, err := strconv.Atoi(tail); err != nil || n < 0 {
					return fmt.Errorf("--tail %q: a number of lines or \"all\": %w", tail, core.ErrInvalid)
				}
			}
			out := env.dockerCli.Out()
			if access {
				return quietEnd(cmd.Context(), follow, showAccessLog(cmd.Context(), env, "", "", follow, tail, out))
			}
			return docker.StreamLogs(cmd.Context(), env.dockerCli.Client(), docker.EdgeName, follow, tail, nil, out)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log output")
	cmd.Flags().StringVar(&tail, "tail", "all", "number of lines to show from the end of the logs")
	cmd.Flags().BoolVar(&access, "access", false, "show the access log (one JSON line per HTTP request) instead of the edge's own log")
	return cmd
}

// quietEnd drops the error of a follow that ended because ctx did
// (Ctrl-C is how a follow ends).
func quietEnd(ctx context.Context, follow bool, err error) error {
	if err != nil && follow && ctx.Err() != nil {
		return nil
	}
	return err
}
