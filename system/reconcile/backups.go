package reconcile

import (
	"context"
	"slices"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/lifecycle"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
)

// Backuper runs the scheduled backups (core/engine.Engine).
type Backuper interface {
	DueBackups(ctx context.Context, now time.Time) ([]lifecycle.DueBackup, error)
	Backup(ctx context.Context, app, service string) (*oprun.OpResult, error)
}

// BackupTick is how often the watcher looks for scheduled backups due.
var BackupTick = time.Second

// Retry bounds of a failed scheduled backup: the wait doubles from the
// first to the last.
const (
	backupRetryFirst = 30 * time.Second
	backupRetryMost  = time.Hour
)

// runBackups runs the scheduled backups ([services.X.backup],
// docs/data.md) of o.Apps (nil: all) until ctx ends: every BackupTick,
// each one due in turn, journaled as op verb backup. One that started
// finishes even when ctx ends meanwhile (its service is stopped while
// it runs). A failed backup is logged and retried after 30 s, then after
// twice as long each time, up to an hour. skip says when the watcher
// must not act (the loop's last pass found this state directory
// superseded by another manager's, R80).
func (o Options) runBackups(ctx context.Context, b Backuper, skip func() bool) {
	type failure struct {
		at   time.Time
		wait time.Duration
	}
	failed := map[string]failure{}
	t := time.NewTicker(BackupTick)
	defer t.Stop()
	for {
		// A tick first: the loop's first pass has said by then whether
		// this state directory is superseded.
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var due []lifecycle.DueBackup
		var err error
		if !skip() {
			due, err = b.DueBackups(ctx, time.Now())
		}
		if err != nil && ctx.Err() == nil {
			o.Log.Error("scheduled backups", "error", err)
		}
		for _, d := range due {
			k := d.App + "/" + d.Service
			f, ok := failed[k]
			if ctx.Err() != nil || (len(o.Apps) > 0 && !slices.Contains(o.Apps, d.App)) || (ok && time.Since(f.at) < f.wait) {
				continue
			}
			res, err := b.Backup(context.WithoutCancel(ctx), d.App, d.Service)
			if err != nil {
				f.at, f.wait = time.Now(), min(max(2*f.wait, backupRetryFirst), backupRetryMost)
				failed[k] = f
				o.Log.Error("scheduled backup failed", "app", d.App, "service", d.Service, "retry_in", f.wait, "error", err)
				continue
			}
			delete(failed, k)
			o.Log.Info("scheduled backup", "app", d.App, "service", d.Service, "op", res.Op.ID)
		}
	}
}
