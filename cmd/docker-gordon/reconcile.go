package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/system/reconcile"
)

type reconcileOptions struct {
	boot     bool
	watch    bool
	interval time.Duration
	format   string
	// certStorageAddr serves the edges' certificate storage
	// (reconcile_certshare.go) while the loop runs.
	certStorageAddr string
}

func newReconcileCommand(env *cliEnv) *cobra.Command {
	var o reconcileOptions
	cmd := &cobra.Command{
		Use:   "reconcile [APP...]",
		Short: "Converge apps: finish interrupted operations, verify and route serving generations, retire superseded ones",
		Long: `Run one periodic pass over the given apps (all apps when none is given)
and exit; with --watch, repeat every --interval until stopped, and also
run a pass for an app at once when the engine reports one of its
containers died, started, restarted, was destroyed or changed health, so
an instance's address is re-resolved within about a second. A busy app
(another verb holds its lock) is skipped until the next pass.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			env.ownerInPasses = o.watch
			stopCerts, err := o.serveCertStorage(env)
			if err != nil {
				return err
			}
			stop := sync.OnceFunc(stopCerts)
			defer stop()
			eng, err := env.engine(ctx, "reconcile")
			if err != nil {
				return err
			}
			mirror := stateMirror(env, o.watch)
			if mirror != nil {
				// A superseded state directory's certificate storage is
				// stale: the edges must not reach it (R80).
				mirror.OnSuperseded = stop
			}
			if o.boot && !mirror.Superseded(ctx) {
				if err := o.runBoot(ctx, env, eng); err != nil {
					return err
				}
			}
			quiet := okPasses{}
			wake := o.watchers(ctx, env, eng, mirror)
			apps := args
			for {
				var reps []engine.ReconcileReport
				var perr error
				if !mirror.Superseded(ctx) {
					reps, perr = eng.Reconcile(ctx, apps)
					mirror.Sync(ctx)
				}
				if o.watch {
					// Apps of other state directories on this engine wake
					// the watcher too; they are none of its business.
					reps = slices.DeleteFunc(reps, func(r engine.ReconcileReport) bool { return r.Unknown || r.Ended })
				} else if perr == nil {
					perr = unknownAppsError(reps, env.opts.stateDir)
				}
				if isJSON(o.format) {
					if reps == nil {
						reps = []engine.ReconcileReport{}
					}
					_ = writeJSON(env.dockerCli.Out(), reps)
				} else {
					for _, r := range reps {
						if o.watch && quiet.same(r) {
							continue // an unchanged "ok" pass: said once already
						}
						renderReconcile(env, r)
					}
				}
				if !o.watch {
					return perr
				}
				if perr != nil && ctx.Err() == nil {
					// A pass cut short by the stop itself is not a failure.
					env.logger.Error("pass failed", "error", perr)
				}
				apps = nil
				for apps == nil {
					select {
					case <-ctx.Done():
						return nil
					case <-time.After(o.interval):
						apps = args
						if apps == nil {
							apps = []string{}
						}
					case app := <-wake:
						apps = reconcile.WokenApps(args, reconcile.DrainWake(app, wake))
					}
				}
			}
		},
	}
	cmd.Flags().BoolVar(&o.boot, "boot", false, "first run the boot reconciliation: bring every running app back (start, verify, route) and keep stopped apps stopped")
	cmd.Flags().BoolVar(&o.watch, "watch", false, "repeat the pass until stopped")
	cmd.Flags().DurationVar(&o.interval, "interval", engine.DefaultReconcileInterval, "time between passes with --watch")
	cmd.Flags().StringVar(&o.certStorageAddr, "cert-storage-addr", "", "with --watch, also serve the state directory's edge certificates on this address (e.g. :9190) as the certificate storage every swarm edge shares (gordon-edge --cert-storage), authorized by the route-push token edge/swarm-token")
	addFormatFlag(cmd, &o.format)
	return cmd
}

// watchers starts, with --watch, the watch of the engine's events (the
// apps they name arrive on the returned channel; nil without --watch)
// and, on one engine, scale to zero (R81).
func (o reconcileOptions) watchers(ctx context.Context, env *cliEnv, eng *engine.Engine, mirror *reconcile.StateMirror) chan string {
	if !o.watch {
		return nil
	}
	wake := make(chan string, 64)
	go reconcile.WatchEngineEvents(ctx, env.dockerCli.Client(), wake, env.logger.Named("events"))
	go reconcile.WatchScaleToZero(ctx, env.opts.stateDir, env.openStore, eng, mirror, env.logger.Named("scale-to-zero"))
	return wake
}

// runBoot runs the boot reconciliation (--boot) and prints its reports;
// its error is returned without --watch, logged with it (the loop runs
// anyway).
func (o reconcileOptions) runBoot(ctx context.Context, env *cliEnv, eng *engine.Engine) error {
	reps, berr := eng.Boot(ctx)
	if isJSON(o.format) {
		_ = writeJSON(env.dockerCli.Out(), map[string]any{"boot": reps})
	} else {
		for _, r := range reps {
			line := fmt.Sprintf("%s: boot %s", r.App, r.Action)
			if r.Error != "" {
				line += ": " + r.Error
			}
			fmt.Fprintln(env.dockerCli.Out(), line)
		}
	}
	if berr != nil && !o.watch {
		return berr
	}
	if berr != nil {
		env.logger.Error("boot reconciliation failed", "error", berr)
	}
	return nil
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

// unknownAppsError is the error of a one-shot pass asked for apps this
// state directory holds no record of (ReconcileReport.Unknown): nothing
// was done to them, and the error says where their records may be.
func unknownAppsError(reps []engine.ReconcileReport, stateDir string) error {
	var names []string
	for _, r := range reps {
		if r.Unknown {
			names = append(names, r.App)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("%w: app %s: not known to state directory %s, so nothing was done (its containers, if any, belong to another state directory: run reconcile with GORDON_STATE_DIR set to the one that deployed it)",
		core.ErrNotFound, strings.Join(names, ", "), stateDir)
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

// stateMirror is nil unless watch is set and the state directory is a
// swarm's; it takes each app's lock as this process (verb reconcile).
func stateMirror(env *cliEnv, watch bool) *reconcile.StateMirror {
	if !watch {
		return nil
	}
	var tryLock func(ctx context.Context, app string) (func(), bool, error)
	if store, err := env.openStore(); err == nil {
		holder := core.LockHolder{PID: os.Getpid(), Verb: "reconcile", Host: hostname()}
		tryLock = func(ctx context.Context, app string) (func(), bool, error) {
			l, ok, err := store.TryLock(ctx, app, holder)
			if err != nil || !ok {
				return nil, false, err
			}
			return func() { _ = l.Unlock() }, true, nil
		}
	}
	return reconcile.NewStateMirror(env.dockerCli.Client(), env.opts.stateDir, tryLock, env.logger)
}
