package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/dashboard"
	"github.com/gordon-deploy/docker-gordon/system/reconcile"
)

func newReconcileCommand(env *cliEnv) *cobra.Command {
	var o reconcile.Options
	var format, dashboardAddr string
	cmd := &cobra.Command{
		Use:   "reconcile [APP...]",
		Short: "Converge apps: finish interrupted operations, verify and route serving generations, retire superseded ones",
		Long: `Run one periodic pass over the given apps (all apps when none is given)
and exit; with --watch, repeat every --interval until stopped, and also
run a pass for an app at once when the engine reports one of its
containers died, started, restarted, was destroyed or changed health, so
an instance's address is re-resolved within about a second. A busy app
(another verb holds its lock) is skipped until the next pass. With
--watch it also runs the scheduled backups ([services.X.backup],
docs/data.md), each journaled as an op with verb backup.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			env.ownerInPasses = o.Watch
			o.Apps, o.StateDir, o.API, o.Err, o.Log = args, env.opts.stateDir, env.dockerCli.Client(), env.dockerCli.Err(), env.logger
			o.Open = func(ctx context.Context) (reconcile.Engine, error) { return env.engine(ctx, "reconcile") }
			o.Locker = func() (reconcile.Locker, error) { return env.openStore() }
			o.Holder = core.LockHolder{PID: os.Getpid(), Verb: "reconcile", Host: hostname()}
			quiet := okPasses{}
			o.Passes = func(reps []engine.ReconcileReport) {
				if isJSON(format) {
					if reps == nil {
						reps = []engine.ReconcileReport{}
					}
					_ = writeJSON(env.dockerCli.Out(), reps)
					return
				}
				for _, r := range reps {
					if o.Watch && quiet.same(r) {
						continue // an unchanged "ok" pass: said once already
					}
					renderReconcile(env, r)
				}
			}
			o.Booted = func(reps []engine.BootReport) { renderBoot(env, format, reps) }
			go serveDashboard(cmd.Context(), env, o.Watch, dashboardAddr)
			return reconcile.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Boot, "boot", false, "first run the boot reconciliation: bring every running app back (start, verify, route) and keep stopped apps stopped")
	cmd.Flags().BoolVar(&o.Watch, "watch", false, "repeat the pass until stopped")
	cmd.Flags().DurationVar(&o.Interval, "interval", engine.DefaultReconcileInterval, "time between passes with --watch")
	cmd.Flags().StringVar(&o.CertStorageAddr, "cert-storage-addr", "", "with --watch, also serve the state directory's edge certificates on this address (e.g. :9190) as the certificate storage every swarm edge shares (gordon-edge --cert-storage), authorized by the route-push token edge/swarm-token")
	cmd.Flags().StringVar(&dashboardAddr, "dashboard", "", "with --watch, also serve the read-only dashboard on this loopback address (system start --dashboard)")
	addFormatFlag(cmd, &format)
	return cmd
}

// serveDashboard serves the dashboard on addr while a --watch loop runs
// (nothing without both); its failure is logged, the loop goes on.
func serveDashboard(ctx context.Context, env *cliEnv, watch bool, addr string) {
	if !watch || addr == "" {
		return
	}
	err := dashboard.Run(ctx, dashboard.Options{Addr: addr, CLI: "docker gordon", Engine: "this engine", Stderr: env.dockerCli.Err(),
		StateDir: env.opts.stateDir, Collector: dashboardCollector(env, env.opts.stateDir)})
	if err != nil && ctx.Err() == nil {
		env.logger.Error("dashboard stopped", "error", err)
	}
}

// renderBoot prints the boot reconciliation's reports.
func renderBoot(env *cliEnv, format string, reps []engine.BootReport) {
	if isJSON(format) {
		_ = writeJSON(env.dockerCli.Out(), map[string]any{"boot": reps})
		return
	}
	for _, r := range reps {
		line := fmt.Sprintf("%s: boot %s", r.App, r.Action)
		if r.Error != "" {
			line += ": " + r.Error
		}
		fmt.Fprintln(env.dockerCli.Out(), line)
	}
}

func renderReconcile(env *cliEnv, r engine.ReconcileReport) {
	w := env.dockerCli.Out()
	switch {
	case r.Unknown:
		fmt.Fprintf(w, "%s: not known to this state directory: nothing done\n", r.App)
	case r.Ended:
		fmt.Fprintf(w, "%s: removed: nothing to reconcile\n", r.App)
	case r.Skipped:
		fmt.Fprintf(w, "%s: skipped (busy)\n", r.App)
	case len(r.Errors) > 0:
		fmt.Fprintf(w, "%s: %d error(s)\n", r.App, len(r.Errors))
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	default:
		fmt.Fprintf(w, "%s: ok (verified %d, retired %d)\n", r.App, len(r.Verified), len(r.Retired))
	}
	for _, id := range r.Removed {
		fmt.Fprintf(w, "  removed %s: labelled for the app, but no record owned it\n", shortID(id))
	}
	for _, rec := range r.Recovered {
		fmt.Fprintf(w, "  recovered %s\n", rec)
	}
}

// okPasses remembers, per app, the last "ok" pass a watcher printed, so a
// watcher passing every second (a swarm's) prints a line when something
// happens, not 86,400 identical lines a day.
type okPasses map[string]string

// same reports whether r is a plain "ok" pass identical to the last one
// printed for its app (and records r otherwise).
func (q okPasses) same(r engine.ReconcileReport) bool {
	plain := !r.Unknown && !r.Ended && !r.Skipped && len(r.Errors) == 0 && len(r.Retired) == 0 && len(r.Removed) == 0 && len(r.Recovered) == 0
	key := fmt.Sprintf("verified %d", len(r.Verified))
	if plain && q[r.App] == key {
		return true
	}
	if plain {
		q[r.App] = key
	} else {
		delete(q, r.App)
	}
	return false
}
