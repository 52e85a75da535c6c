package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/engine/jobs"
	"github.com/gordon-deploy/docker-gordon/system"
)

type logsOptions struct {
	service  string
	follow   bool
	tail     string
	since    string
	format   string
	access   bool
	instance int
	job      string
}

func newLogsCommand(env *cliEnv) *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs APP [--service S [--instance N]] [-f] [--tail all|N] [--since T] [--access | --job NAME]",
		Short: "Show the logs of an app's serving containers",
		Long: `Show the logs of the app's serving containers (every service, or only
--service), each line prefixed with its service, or with service-N when the
service runs several instances (web-1 |, web-2 |, as docker compose logs
does); --instance N narrows it to one instance. --since takes an RFC 3339
time or a duration ago (e.g. 10m). With --format json each line is one JSON
object {service, instance, time, stream, text} (instance only when the
service runs several). With --access show the app's lines of
the edge's access log instead (one JSON line per HTTP request; --service
and --tail apply: the last N of the app's requests). --job NAME: docs/jobs.md.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseTail(o.tail)
			if err != nil {
				return err
			}
			opts := core.LogOptions{Tail: n, Follow: o.follow, Instance: o.instance}
			if o.since != "" {
				t, err := parseSince(o.since, time.Now())
				if err != nil {
					return err
				}
				opts.Since = t
			}
			ctx := cmd.Context()
			if o.access {
				tail := "all"
				if n > 0 {
					tail = strconv.Itoa(n)
				}
				return quietEnd(ctx, o.follow, system.ShowAccessLog(ctx, env.dockerCli.Client(), env.opts.stateDir, args[0], o.service, o.follow, tail, env.dockerCli.Out()))
			}
			store, err := env.openStore()
			if err != nil {
				return err
			}
			host, err := env.pluginHost()
			if err != nil {
				return err
			}
			rt, err := host.Runtime(ctx, env.platform().RuntimeName())
			if err != nil {
				return err
			}
			eng := &engine.Engine{Store: store, Runtime: rt, Logger: env.logger.Named("engine")}
			w := env.dockerCli.Out()
			if o.job != "" {
				return jobLogs(cmd, env, eng, args[0], o, opts)
			}
			width := len(o.service)
			err = eng.Logs(ctx, args[0], o.service, opts, func(service string, l core.LogLine) error {
				if isJSON(o.format) {
					return writeJSONLine(w, struct {
						Service  string    `json:"service"`
						Instance int       `json:"instance,omitempty"`
						Time     time.Time `json:"time"`
						Stream   string    `json:"stream"`
						Text     string    `json:"text"`
					}{service, l.Instance, l.Time, l.Stream, l.Text})
				}
				if l.Instance > 0 {
					service = fmt.Sprintf("%s-%d", service, l.Instance)
				}
				if len(service) > width {
					width = len(service)
				}
				_, err := fmt.Fprintf(w, "%-*s | %s\n", width, service, l.Text)
				return err
			})
			if err != nil && o.follow && ctx.Err() != nil {
				// Ctrl-C (or SIGTERM) is how a follow ends: not an error.
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.service, "service", "", "only this service")
	f.IntVar(&o.instance, "instance", 0, "only this instance of --service, from 1 (as status lists them; 0 = all)")
	f.BoolVarP(&o.follow, "follow", "f", false, "follow new lines until interrupted")
	f.StringVar(&o.tail, "tail", "all", "only the last N lines of each container (all: every line)")
	f.StringVar(&o.since, "since", "", "only lines since an RFC 3339 time or a duration ago (e.g. 10m)")
	f.BoolVar(&o.access, "access", false, "show the app's requests from the edge's access log (JSON lines) instead of its containers' logs")
	f.StringVar(&o.job, "job", "", "show the output of this scheduled job's last run instead")
	addFormatFlag(cmd, &o.format)
	return cmd
}

// jobLogs is logs --job: the last run's output, its op named on stderr.
func jobLogs(cmd *cobra.Command, env *cliEnv, eng *engine.Engine, app string, o logsOptions, opts core.LogOptions) error {
	if o.service != "" || o.instance != 0 || o.access {
		return fmt.Errorf("logs %s --job %s: --service, --instance and --access do not apply to a job's output", app, o.job)
	}
	op, err := eng.JobLogs(cmd.Context(), app, o.job, opts, func(l core.LogLine) error {
		if isJSON(o.format) {
			return writeJSONLine(env.dockerCli.Out(), l)
		}
		_, err := fmt.Fprintln(env.dockerCli.Out(), l.Text)
		return err
	})
	if op.ID != "" {
		fmt.Fprintln(env.dockerCli.Err(), jobs.Summary(app, op))
	}
	return quietEnd(cmd.Context(), o.follow, err)
}

// parseSince accepts an RFC 3339 time or a Go duration meaning "that long
// before now".
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("logs: --since %q: negative duration", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("logs: --since %q: want an RFC 3339 time (2026-09-10T12:00:00Z) or a duration (10m)", strings.TrimSpace(s))
}

// writeJSONLine writes v as one compact JSON line (a stream of log lines).
func writeJSONLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// parseTail reads --tail: "all" (or 0) is every line, else a count N ≥ 0.
func parseTail(s string) (int, error) {
	if s == "all" || s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("logs: --tail %q: want all or a number of lines (for example --tail 100)", s)
	}
	return n, nil
}
