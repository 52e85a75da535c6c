package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/engine/volsnap"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// VerbBackup is the verb of a scheduled backup ([services.X.backup],
// docs/data.md): a restart op, like a snapshot's.
const VerbBackup = "backup"

// backupGap is the least time between the end of a service's backup and
// the start of its next: a backup that outlasts its every would
// otherwise start again at once, and a verb waiting for the app lock
// would never get it between two.
const backupGap = 2 * time.Second

// DueBackup is one scheduled backup due: the service, and when it fell due.
type DueBackup struct {
	App, Service string
	Due          time.Time
}

// DueBackups lists the scheduled backups due at now, of every app this
// state directory serves (a stopped app or an asleep service is skipped:
// nothing writes to its volumes). A service's next
// backup counts from its last one (trigger backup), else from when its
// serving generation was activated; one missed while the machine was down
// is due once; none is due within backupGap of the end of the last.
func (e *Engine) DueBackups(ctx context.Context, now time.Time) ([]DueBackup, error) {
	if e.Snapshots == nil {
		return nil, nil
	}
	apps, err := e.Store.ListApps(ctx)
	if err != nil {
		return nil, fmt.Errorf("scheduled backups: list apps: %w", err)
	}
	var due []DueBackup
	var errs []error
	for _, app := range apps {
		active, err := e.Store.LoadActive(ctx, app)
		if errors.Is(err, core.ErrNotFound) {
			continue
		}
		intent, ierr := e.Store.LoadIntent(ctx, app)
		if err = errors.Join(err, ierr); err != nil {
			errs = append(errs, fmt.Errorf("scheduled backups of %s: %w", app, err))
			continue
		}
		if intent.Stopped {
			continue
		}
		list, err := e.Snapshots.List(app)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range steps.ActiveServiceNames(active) {
			as := active.Services[name]
			if on, _ := snapshot.BackupPolicy(&as.Spec); !on || (len(as.Spec.Volumes) == 0 && len(as.Spec.BackupCommand) == 0) || as.AsleepSince != nil {
				continue // an asleep service writes nothing: due once it wakes
			}
			since, ended := as.ActivatedAt, time.Time{}
			for _, m := range list {
				if m.Service == name && m.Trigger == snapshot.TriggerBackup {
					since, ended = m.CreatedAt, m.CreatedAt.Add(m.Duration.D()) // oldest first: the last one wins
				}
			}
			at := snapshot.NextBackup(&as.Spec, since)
			if gap := ended.Add(backupGap); !at.IsZero() && at.Before(gap) {
				at = gap // a backup longer than its every: never back to back
			}
			if !at.IsZero() && !at.After(now) {
				due = append(due, DueBackup{App: app, Service: name, Due: at})
			}
		}
	}
	return due, errors.Join(errs...)
}

// Backup takes one scheduled backup of the service: an in-place restart
// journaled with verb backup, whose snapshot (trigger backup, retention
// by [services.X.backup].keep) is taken between the stop and the start
// while the edge holds the service's requests; or, when the backup sets
// a command, an online dump (dumpBackup). A failed backup is sent to the
// [notify] webhook of the app's latest revision.
func (e *Engine) Backup(ctx context.Context, app, service string) (*oprun.OpResult, error) {
	var res *oprun.OpResult
	var err error
	if cmd := e.backupCommand(ctx, app, service); len(cmd) > 0 {
		res, _, err = e.dumpBackup(ctx, app, service, false)
	} else {
		res, err = e.dataRestart(ctx, oprun.LifecycleRequest{App: app, Services: []string{service}}, &dataAction{verb: VerbBackup})
	}
	if err != nil && res != nil && res.Op.Terminal() {
		op := res.Op
		if id, derr := e.Store.LoadDesired(ctx, app); derr == nil {
			op.Revision = id // the webhook of the app's latest revision
		}
		e.NotifyOp(ctx, op, err)
	}
	return res, err
}

// backupCommand is the serving service's [services.X.backup] command (nil
// when it has none, or the app cannot be read: the restart path reports
// that).
func (e *Engine) backupCommand(ctx context.Context, app, service string) []string {
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil || active.Services[service] == nil {
		return nil
	}
	return active.Services[service].Spec.BackupCommand
}

// dumpBackup is a backup by [services.X.backup] command, under the app
// lock: journaled as a restart op with verb backup (verb snapshot when
// manual: `snapshots create`, kept apart from the scheduled ones' keep)
// and one step service.X.dump, it runs the command by exec in the serving
// container (no stop, no hold: requests are served meanwhile) and stores
// its stdout as a snapshot (volsnap.Dump). Errors: an app that was never
// deployed, or a service with no running container (asleep, stopped),
// is a conflict and changes nothing; a failed dump fails the op, and
// nothing is kept.
func (e *Engine) dumpBackup(ctx context.Context, app, service string, manual bool) (*oprun.OpResult, *snapshot.Manifest, error) {
	verb, what := VerbBackup, "backup"
	if manual {
		verb, what = VerbSnapshot, "snapshots create"
	}
	req := oprun.LifecycleRequest{App: app, Services: []string{service}, Verb: verb}
	fp := steps.Fingerprint(core.OpRestart, app, verb, "dump", service)
	lk, res, ok, err := e.LifecyclePreamble(ctx, core.OpRestart, req, fp)
	if !ok {
		return res, nil, err
	}
	defer lk.Unlock()
	active, err := e.activeOrNeverDeployed(ctx, what, app)
	if err != nil {
		return nil, nil, err
	}
	as := active.Services[service]
	switch {
	case as == nil || len(as.Spec.BackupCommand) == 0:
		return nil, nil, fmt.Errorf("%w: %s %s: service %s has no backup command", core.ErrInvalid, what, app, service)
	case as.Container == "" || as.AsleepSince != nil:
		return nil, nil, fmt.Errorf("%w: %s %s: service %s has no running container to dump from (asleep or stopped); start it, then retry", core.ErrConflict, what, app, service)
	}
	r, replay, err := e.ClaimLifecycle(ctx, core.OpRestart, req, fp, nil)
	if r == nil {
		return replay, nil, err
	}
	r.Op.Verb, r.Op.Revision = verb, as.EffectiveRevision
	_, keep := snapshot.BackupPolicy(&as.Spec)
	se := e.Engine.Engine.Engine
	spec := as.Spec
	_, secrets, _ := se.SecretEnv(ctx, nil, app, &spec) // masked in what an error quotes; none readable: none masked
	j := volsnap.Journal{Op: r.Op, Save: func() { r.Save(ctx) }}
	m, _, derr := volsnap.DumpStep(ctx, se, j, volsnap.DumpRequest{App: app, Service: service, Container: as.Container,
		Command: as.Spec.BackupCommand, Timeout: as.Spec.BackupTimeout.D(), Keep: keep, Op: r.Op.ID, Revision: as.EffectiveRevision, Secrets: secrets, Manual: manual})
	sr := r.ResultFor(service)
	sr.Before, sr.Result = as.Container, steps.ResultUnchanged
	if derr != nil {
		sr.Result, sr.Error = steps.ResultFailed, derr.Error()
	}
	r.Finalize()
	if err := r.SaveStrict(ctx); err != nil {
		return r.Result(), nil, errors.Join(derr, err)
	}
	if derr != nil {
		return r.Result(), nil, fmt.Errorf("%s %s: %w", what, app, derr)
	}
	return r.Result(), m, nil
}
