package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// VerbBackup is the verb of a scheduled backup ([services.X.backup],
// docs/data.md): a restart op, like a snapshot's.
const VerbBackup = "backup"

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
// is due once.
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
			if on, _ := snapshot.BackupPolicy(&as.Spec); !on || len(as.Spec.Volumes) == 0 || as.AsleepSince != nil {
				continue // an asleep service writes nothing: due once it wakes
			}
			since := as.ActivatedAt
			for _, m := range list {
				if m.Service == name && m.Trigger == snapshot.TriggerBackup {
					since = m.CreatedAt // oldest first: the last one wins
				}
			}
			if at := snapshot.NextBackup(&as.Spec, since); !at.IsZero() && !at.After(now) {
				due = append(due, DueBackup{App: app, Service: name, Due: at})
			}
		}
	}
	return due, errors.Join(errs...)
}

// Backup takes one scheduled backup of the service: an in-place restart
// journaled with verb backup, whose snapshot (trigger backup, retention
// by [services.X.backup].keep) is taken between the stop and the start
// while the edge holds the service's requests. A failed backup is sent
// to the [notify] webhook of the app's latest revision.
func (e *Engine) Backup(ctx context.Context, app, service string) (*oprun.OpResult, error) {
	res, err := e.dataRestart(ctx, oprun.LifecycleRequest{App: app, Services: []string{service}}, &dataAction{verb: VerbBackup})
	if err != nil && res != nil && res.Op.Terminal() {
		op := res.Op
		if id, derr := e.Store.LoadDesired(ctx, app); derr == nil && op.Revision == "" {
			op.Revision = id
		}
		e.NotifyOp(ctx, op, err)
	}
	return res, err
}
