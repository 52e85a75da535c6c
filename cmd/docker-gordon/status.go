package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
)

func newStatusCommand(env *cliEnv) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status [APP]",
		Short: "Show each service's serving generation: container, image, revision, state, binds, routes, markers",
		Args:  usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, err := env.openStore()
			if err != nil {
				return err
			}
			apps := args
			if len(apps) == 0 {
				if apps, err = store.ListApps(ctx); err != nil {
					return err
				}
			}
			eng := &core.Engine{Store: store}
			// The runtime is optional for status: without an engine the
			// state column says "unknown" instead of failing.
			if host, herr := env.pluginHost(); herr == nil {
				if rt, rerr := host.Runtime(ctx, "docker"); rerr == nil {
					eng.Runtime = rt
				} else {
					env.logger.Warn("runtime unavailable; container state unknown", "error", rerr)
				}
			}
			var out []core.AppStatus
			for _, app := range apps {
				st, err := eng.Status(ctx, app)
				if errors.Is(err, core.ErrNotFound) && len(args) > 0 {
					return fmt.Errorf("app %q not found in %s (deploy it with: docker gordon deploy -f FILE)", app, env.opts.stateDir)
				}
				if errors.Is(err, core.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				out = append(out, st)
			}
			if isJSON(format) {
				if out == nil {
					out = []core.AppStatus{}
				}
				return writeJSON(env.dockerCli.Out(), out)
			}
			if len(out) == 0 {
				fmt.Fprintln(env.dockerCli.Out(), "no apps")
				return nil
			}
			running := false
			for i, st := range out {
				if i > 0 {
					fmt.Fprintln(env.dockerCli.Out())
				}
				renderStatus(env, st)
				running = running || !st.Stopped
			}
			renderCertStates(ctx, env, out)
			if live, _ := edgeLive(ctx, env.opts.stateDir); running && !live {
				fmt.Fprintln(env.dockerCli.Err(), "warning: the edge proxy is not running, so no route above is served (docker gordon edge start; docker gordon edge status)")
			}
			return nil
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

func renderStatus(env *cliEnv, st core.AppStatus) {
	w := env.dockerCli.Out()
	intent := "running"
	if st.Stopped {
		intent = "stopped"
	}
	fmt.Fprintf(w, "app %s (%s, desired %s", st.App, intent, orDash(st.Desired))
	if st.LastOp != nil {
		fmt.Fprintf(w, ", last op %s %s %s", st.LastOp.ID, st.LastOp.Kind, orDash(st.LastOp.Outcome))
	}
	fmt.Fprintln(w, ")")
	tw := newTable(w)
	fmt.Fprintln(tw, "SERVICE\tCONTAINER\tIMAGE\tREVISION\tSTATE\tBINDS\tROUTES\tFLAGS")
	for _, s := range st.Services {
		var flags []string
		if s.SingleWriter {
			flags = append(flags, "single-writer")
		}
		flags = append(flags, s.Markers...)
		fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s\t%s\t%s\t%s\t%s\n", s.Service, shortID(s.Container), s.Image, shortID(s.Digest),
			s.Revision, s.State, formatBinds(s.BackendBinds, s.UDPBackendBinds), orDash(strings.Join(s.Routes, ", ")), orDash(strings.Join(flags, ",")))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
