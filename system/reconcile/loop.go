package reconcile

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/jobs"
	passes "github.com/gordon-deploy/docker-gordon/core/engine/reconcile"
)

// Engine is what the reconcile verb runs: the engine's passes, its boot
// reconciliation and, with Watch, its job scheduler (core/engine.Engine).
type Engine interface {
	Reconcile(ctx context.Context, apps []string) ([]passes.ReconcileReport, error)
	Boot(ctx context.Context) ([]passes.BootReport, error)
	TickJobs(ctx context.Context, apps []string, done func(jobs.Report))
	WaitJobs()
}

// Locker takes an app's lock without waiting (the journal's store).
type Locker interface {
	TryLock(ctx context.Context, app string, holder core.LockHolder) (core.AppLock, bool, error)
}

// Options are the reconcile verb's settings and what it reports to.
type Options struct {
	// Apps are the apps of every periodic pass (nil: all).
	Apps []string
	// Boot first runs the boot reconciliation; Watch repeats the pass
	// every Interval and when the engine reports a container event.
	Boot, Watch bool
	Interval    time.Duration
	// JobTick is how often, with Watch, the apps' scheduled jobs are
	// checked for a due run (zero: DefaultJobTick).
	JobTick time.Duration
	// CertStorageAddr, with Watch, serves the edges' certificate storage
	// (ServeCertStorage) while the loop runs.
	CertStorageAddr string
	StateDir        string
	API             client.APIClient
	// Err gets the certificate storage's address; Log diagnostics.
	Err io.Writer
	Log hclog.Logger
	// Open opens the engine (after the certificate storage serves).
	Open func(ctx context.Context) (Engine, error)
	// Locker opens the store whose locks the state mirror takes (nil, or
	// an error: the mirror reads records unlocked); Holder is the holder
	// it takes them as.
	Locker func() (Locker, error)
	Holder core.LockHolder
	// Passes gets each pass's reports (with Watch, those of apps of this
	// state directory only); Booted the boot's.
	Passes func(reps []passes.ReconcileReport)
	Booted func(reps []passes.BootReport)
}

// Run is the reconcile verb: one pass over o.Apps and return (an app this
// state directory holds no record of is core.ErrNotFound), or with Watch
// passes until ctx ends: every Interval, and at once for an app whose
// container the engine reports died, started, restarted, was destroyed or
// changed health. A failed pass is logged and the loop goes on. On a
// swarm the state directory's records are mirrored after each pass, and
// no pass or job runs while another manager's state directory owns the
// edge (SPEC R80). With Watch it also runs the scheduled backups
// (runBackups) and the apps' scheduled jobs when due (runJobs).
func Run(ctx context.Context, o Options) error {
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
	stopCerts, err := o.serveCertStorage()
	if err != nil {
		return err
	}
	stop := sync.OnceFunc(stopCerts)
	defer stop()
	eng, err := o.Open(ctx)
	if err != nil {
		return err
	}
	mirror := o.stateMirror()
	if mirror != nil {
		// A superseded state directory's certificate storage is stale:
		// the edges must not reach it (R80).
		mirror.OnSuperseded = stop
	}
	if o.Boot && !mirror.Superseded(ctx) {
		if err := o.runBoot(ctx, eng); err != nil {
			return err
		}
	}
	var wake chan string
	var superseded atomic.Bool
	if o.Watch {
		wake = make(chan string, 64)
		go WatchEngineEvents(ctx, o.API, wake, o.Log.Named("events"))
		defer o.runJobs(ctx, eng, &superseded)()
		o.scaleToZero(ctx, eng, mirror)
		if b, ok := eng.(Backuper); ok {
			var wg sync.WaitGroup
			wg.Go(func() { o.runBackups(ctx, b, superseded.Load) })
			defer wg.Wait()
		}
	}
	apps := o.Apps
	for {
		var reps []passes.ReconcileReport
		var perr error
		sup := mirror.Superseded(ctx)
		superseded.Store(sup)
		if !sup {
			reps, perr = eng.Reconcile(ctx, apps)
			mirror.Sync(ctx)
		}
		if o.Watch {
			// Apps of other state directories on this engine wake the
			// watcher too; they are none of its business.
			reps = slices.DeleteFunc(reps, func(r passes.ReconcileReport) bool { return r.Unknown || r.Ended })
		} else if perr == nil {
			perr = UnknownAppsError(reps, o.StateDir)
		}
		o.Passes(reps)
		if !o.Watch {
			return perr
		}
		if perr != nil && ctx.Err() == nil {
			// A pass cut short by the stop itself is not a failure.
			o.Log.Error("pass failed", "error", perr)
		}
		if apps = o.next(ctx, wake); apps == nil {
			return nil
		}
	}
}

// DefaultJobTick is how often the watcher checks for due jobs.
const DefaultJobTick = time.Second

// runJobs starts the apps' due jobs every JobTick until ctx ends, unless
// the last pass found the state directory superseded; each run's end is
// logged. The returned func waits for the ticker and every run to end
// (a run cut short by ctx is journaled as cancelled).
func (o Options) runJobs(ctx context.Context, eng Engine, superseded *atomic.Bool) (wait func()) {
	tick := o.JobTick
	if tick <= 0 {
		tick = DefaultJobTick
	}
	log := o.Log.Named("jobs")
	report := func(r jobs.Report) {
		switch {
		case r.Skipped():
			log.Info("job skipped", "app", r.App, "job", r.Job, "reason", r.Result.Skipped)
		case r.Err != nil:
			log.Warn("job not run", "app", r.App, "job", r.Job, "error", r.Err)
		default:
			log.Info("job ran", "app", r.App, "job", r.Job, "op", r.Result.Op.ID, "outcome", r.Result.Op.Outcome)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !superseded.Load() {
					eng.TickJobs(ctx, o.Apps, report)
				}
			}
		}
	}()
	return func() {
		<-done
		eng.WaitJobs()
	}
}

// next waits for the next pass: the apps it covers (empty: all), or nil
// when ctx ended.
func (o Options) next(ctx context.Context, wake chan string) []string {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Interval):
			if o.Apps == nil {
				return []string{}
			}
			return o.Apps
		case app := <-wake:
			if apps := WokenApps(o.Apps, DrainWake(app, wake)); apps != nil {
				return apps
			}
		}
	}
}

// runBoot runs the boot reconciliation and reports it; its error is
// returned without Watch, logged with it (the loop runs anyway).
func (o Options) runBoot(ctx context.Context, eng Engine) error {
	reps, berr := eng.Boot(ctx)
	o.Booted(reps)
	if berr != nil && !o.Watch {
		return berr
	}
	if berr != nil {
		o.Log.Error("boot reconciliation failed", "error", berr)
	}
	return nil
}

// serveCertStorage serves the certificate storage when CertStorageAddr is
// set (stop does nothing otherwise); it needs Watch (core.ErrInvalid).
func (o Options) serveCertStorage() (stop func(), err error) {
	if o.CertStorageAddr == "" {
		return func() {}, nil
	}
	if !o.Watch {
		return nil, fmt.Errorf("%w: --cert-storage-addr serves the edges' certificate storage while the loop runs: it needs --watch", core.ErrInvalid)
	}
	_, stop, err = ServeCertStorage(o.StateDir, o.CertStorageAddr, o.Err, o.Log.Named("certshare"))
	return stop, err
}

// stateMirror is nil unless Watch is set and the state directory is a
// swarm's; it takes each app's lock as o.Holder.
func (o Options) stateMirror() *StateMirror {
	if !o.Watch {
		return nil
	}
	var tryLock func(ctx context.Context, app string) (func(), bool, error)
	if o.Locker != nil {
		if store, err := o.Locker(); err == nil {
			tryLock = func(ctx context.Context, app string) (func(), bool, error) {
				l, ok, err := store.TryLock(ctx, app, o.Holder)
				if err != nil || !ok {
					return nil, false, err
				}
				return func() { _ = l.Unlock() }, true, nil
			}
		}
	}
	return NewStateMirror(o.API, o.StateDir, tryLock, o.Log)
}

// scaleToZero starts scale to zero's watcher (SPEC R81) when the engine
// can sleep and wake and the state directory is one engine's (a swarm's
// has a state mirror: a swarm does not scale to zero yet).
func (o Options) scaleToZero(ctx context.Context, eng Engine, mirror *StateMirror) {
	s, ok := eng.(Sleeper)
	if !ok || mirror != nil || o.Locker == nil {
		return
	}
	l, err := o.Locker()
	store, ok := l.(core.Store)
	if err != nil || !ok {
		return
	}
	go WatchScaleToZero(ctx, o.StateDir, store, s, o.Log.Named("scale-to-zero"))
}

// UnknownAppsError is the error of a one-shot pass asked for apps this
// state directory holds no record of (ReconcileReport.Unknown): nothing
// was done to them, and the error says where their records may be.
func UnknownAppsError(reps []passes.ReconcileReport, stateDir string) error {
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
