package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
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
			eng := &engine.Engine{Store: store}
			// The runtime is optional for status: without an engine the
			// state column says "unknown" instead of failing.
			if host, herr := env.pluginHost(); herr == nil {
				if rt, rerr := host.Runtime(ctx, env.platform().RuntimeName()); rerr == nil {
					eng.Runtime = rt
				} else {
					env.logger.Warn("runtime unavailable; container state unknown", "error", rerr)
				}
			}
			var out []engine.AppStatus
			var unreadable []string
			for _, app := range apps {
				st, err := eng.Status(ctx, app)
				if errors.Is(err, core.ErrNotFound) && len(args) > 0 {
					return fmt.Errorf("app %q not found in %s (deploy it with: docker gordon deploy -f FILE)", app, env.opts.stateDir)
				}
				if errors.Is(err, core.ErrNotFound) {
					continue
				}
				if err != nil {
					// One app's unreadable record is shown and makes the
					// exit status 1; the other apps are still listed.
					if st.State != engine.AppStateUnreadable {
						st.State, st.Problems = engine.AppStateUnreadable, []string{err.Error()}
					}
					unreadable = append(unreadable, app)
				}
				out = append(out, st)
			}
			statusErr := func() error {
				if len(unreadable) == 0 {
					return nil
				}
				return fmt.Errorf("status: the records of %s could not be read (see above; fix or restore the named file)", strings.Join(unreadable, ", "))
			}
			if isJSON(format) {
				if out == nil {
					out = []engine.AppStatus{}
				}
				if err := writeJSON(env.dockerCli.Out(), out); err != nil {
					return err
				}
				return statusErr()
			}
			if len(out) == 0 {
				fmt.Fprintln(env.dockerCli.Out(), "no apps")
				return nil
			}
			renderSwarmLine(ctx, env)
			running := false
			for i, st := range out {
				if i > 0 {
					fmt.Fprintln(env.dockerCli.Out())
				}
				renderStatus(env, st)
				running = running || !st.Stopped
			}
			renderCertStates(ctx, env, out)
			if running && !edgeLive(ctx, env) {
				fmt.Fprintln(env.dockerCli.Err(), "warning: the edge proxy is not running, so no route above is served (docker gordon edge start; docker gordon edge status)")
			}
			return statusErr()
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

func renderStatus(env *cliEnv, st engine.AppStatus) {
	w := env.dockerCli.Out()
	state := st.State
	if state == "" {
		state = "running"
		if st.Stopped {
			state = "stopped"
		}
	}
	fmt.Fprintf(w, "app %s (%s, desired %s", st.App, state, orDash(st.Desired))
	if st.DesiredUnclaimed {
		fmt.Fprint(w, " never deployed")
	}
	if st.LastOp != nil {
		verb := st.LastOp.Kind
		if st.LastOp.Verb != "" {
			verb = st.LastOp.Verb
		}
		fmt.Fprintf(w, ", last op %s %s", st.LastOp.ID, verb)
		if st.LastOp.Revision != "" {
			fmt.Fprintf(w, " %s", st.LastOp.Revision)
		}
		fmt.Fprintf(w, " %s", orDash(string(st.LastOp.Outcome)))
	}
	fmt.Fprintln(w, ")")
	if m := st.Maintenance; m != nil {
		fmt.Fprintf(w, "  %s\n", maintenanceLine(m))
	}
	for _, p := range st.Problems {
		fmt.Fprintf(w, "  %s: %s\n", state, p)
	}
	if st.DesiredUnclaimed {
		fmt.Fprintf(w, "  note: revision %s was stored but no operation deployed it (its deploy stopped before the operation was journaled, e.g. a full state disk); run `docker gordon deploy %s` to deploy it\n", st.Desired, st.App)
	}
	if len(st.Services) == 0 {
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "SERVICE\tCONTAINER\tIMAGE\tREVISION\tSTATE\tPORTS\tROUTES\tFLAGS")
	for _, s := range st.Services {
		var flags []string
		if s.SingleWriter {
			flags = append(flags, "single-writer")
		}
		flags = append(flags, s.Markers...)
		state := stateCell(s.State, s.Health, s.Node)
		if !st.Stopped && (s.Declared > 1 || s.Serving < s.Declared) {
			state += fmt.Sprintf(", %d of %d", s.Serving, s.Declared)
		}
		if s.AsleepSince != nil {
			state = "asleep since " + s.AsleepSince.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s\t%s\t%s\t%s\t%s\n", s.Service, shortID(s.Container), s.Image, shortID(s.Digest),
			s.Revision, state, formatBinds(s.IP, s.BackendBinds, s.UDPBackendBinds), orDash(strings.Join(s.Routes, ", ")), orDash(strings.Join(flags, ",")))
	}
	tw.Flush()
	printInstances(w, st.Services)
	for _, s := range st.Services {
		fmt.Fprintf(w, "%s: readiness %s\n", s.Service, s.Readiness)
	}
	for _, s := range st.Services {
		if r := s.LastRecovery; r != nil {
			fmt.Fprintf(w, "%s: recovered %s at %s: %s (%s)\n", s.Service, shortID(r.Container), r.At.UTC().Format(time.RFC3339), r.Reason, r.Action)
		}
	}
}

// printInstances prints, for the services that run more than one
// instance, one row per instance: container, state (health), binds.
func printInstances(w io.Writer, services []engine.ServiceStatus) {
	var tw *tabwriter.Writer
	for _, s := range services {
		for i, in := range s.Instances {
			if tw == nil {
				tw = newTable(w)
				fmt.Fprintln(tw, "SERVICE\tINSTANCE\tCONTAINER\tSTATE\tPORTS")
			}
			state := stateCell(in.State, in.Health, in.Node)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", s.Service, i+1, shortID(in.Container), state, formatBinds(in.IP, in.BackendBinds, in.UDPBackendBinds))
		}
	}
	if tw != nil {
		tw.Flush()
	}
}

// stateCell is "running (healthy) on n2": the runtime state, the health
// when there is one, the swarm node when there is one.
func stateCell(state, health, node string) string {
	if health != "" {
		state += " (" + health + ")"
	}
	if node != "" {
		state += " on " + node
	}
	return state
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
