package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/cmd/internal/usererr"
	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/dashboard"
	"github.com/gordon-deploy/docker-gordon/system"
)

// newDashboardCommand is `dashboard [--addr HOST:PORT] [--token-file F]`
// (package dashboard, whose doc says more). With a remote engine or a
// swarm, a runner there reads the state (hidden --feed).
func newDashboardCommand(env *cliEnv) *cobra.Command {
	o := dashboard.Options{CLI: "docker gordon"}
	var feed bool
	cmd := &cobra.Command{
		Use:         "dashboard [--addr HOST:PORT] [--token-file FILE]",
		Short:       "Serve a read-only live web view of the apps, their instances, operations and traffic",
		Long:        dashboard.Help,
		Args:        usageArgs(cobra.NoArgs),
		Annotations: map[string]string{annotationRemoteSelf: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Engine, o.Stderr, o.StateDir = env.target.Context, env.dockerCli.Err(), env.opts.stateDir
			o.Collector = dashboardCollector(env, o.StateDir)
			if feed {
				return dashboard.RunFeed(cmd.Context(), o, env.dockerCli.Out())
			}
			if c := env.target.Context; c != "" && c != "default" {
				o.CLI = "docker --context " + c + " gordon"
			}
			if env.target.Remote || env.platform().NeedsRunner(false) {
				o.Remote = func(ctx context.Context, out io.Writer) error {
					s := env.streams()
					s.Out = out
					return runRemoteTo(cmd, env, nil, s)
				}
				_ = cmd.Flags().Set("feed", "true")
			}
			return dashboard.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Addr, "addr", dashboard.DefaultAddr, "address to serve on (a non-loopback one needs --token-file)")
	cmd.Flags().StringVar(&o.TokenFile, "token-file", "", "file holding the token every request must carry")
	cmd.Flags().DurationVar(&o.Interval, "interval", 2*time.Second, "how often containers and the edge's counters are read (1s at least)")
	cmd.Flags().BoolVar(&feed, "feed", false, "write the state as JSON lines on stdout (a runner's side)")
	_ = cmd.Flags().MarkHidden("feed")
	return cmd
}

// dashboardCollector reads what status, ops, logs --access and certs ls
// read of stateDir (the runtime backend is left out when it cannot start).
func dashboardCollector(env *cliEnv, stateDir string) func(context.Context) (*dashboard.Collector, error) {
	return func(ctx context.Context) (*dashboard.Collector, error) {
		store, err := env.openStore()
		c := &dashboard.Collector{Store: store, Words: usererr.Words, Sections: dashboard.DataSections(store, env.snapshotStore()),
			Metrics: func(ctx context.Context) ([]byte, error) { return system.EdgeMetrics(ctx, stateDir) },
			Certs:   func(context.Context) ([]core.CertInfo, error) { return system.EdgeCerts(stateDir) },
			AccessLog: func(ctx context.Context, w io.Writer) error {
				return system.ShowAccessLog(ctx, env.dockerCli.Client(), stateDir, "", "", false, "1000", w)
			}}
		if host, herr := env.pluginHost(); herr == nil {
			c.Runtime, _ = host.Runtime(ctx, env.platform().RuntimeName())
		}
		return c, err
	}
}
