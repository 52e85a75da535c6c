package reconcile

import (
	"context"
	"fmt"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/volsnap"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// undoInterruptedRestores puts back the data of each service whose
// restore step (service.X.restore) the latest op of app was cut off in:
// its volumes may hold part of a snapshot. The data comes from the
// snapshot the same op took of the service just before the restore, while
// the service is stopped, before the pass starts it again; the step's
// error then says what was put back, or why not and what to do. It runs
// once per step (the text says it ran).
func (e *Engine) undoInterruptedRestores(ctx context.Context, app string) error {
	op, err := e.Store.LatestOp(ctx, app)
	if err != nil {
		return nil // no op: nothing was cut off
	}
	changed := false
	for i := range op.Steps {
		st := &op.Steps[i]
		if st.State != core.StepFailed || !strings.HasSuffix(st.ID, ".restore") || st.Error != oprun.TextInterruptedRestore {
			continue
		}
		st.Error = oprun.TextInterruptedRestore + "; " + e.putBack(ctx, app, op.ID, st.Service)
		st.UpdatedAt, changed = e.Now(), true
	}
	if !changed {
		return nil
	}
	return e.Store.SaveOp(ctx, op)
}

// putBack restores into service's volumes the snapshot op took of them
// before its restore, and says how that went.
func (e *Engine) putBack(ctx context.Context, app, op, service string) string {
	redo := fmt.Sprintf("restore a snapshot with `docker gordon snapshots restore %s ID` (`snapshots ls %s` lists them)", app, app)
	if e.Snapshots == nil {
		return "no snapshot store: " + redo
	}
	active, err := e.Store.LoadActive(ctx, app)
	if err != nil || active.Services[service] == nil {
		return "the service no longer serves: " + redo
	}
	as := active.Services[service]
	list, err := e.Snapshots.List(app)
	if err != nil {
		return fmt.Sprintf("the snapshots cannot be listed (%v): %s", err, redo)
	}
	var undo *snapshot.Manifest
	for i := range list {
		if list[i].Op == op && list[i].Service == service && !list[i].IsDump() {
			undo = &list[i]
		}
	}
	if undo == nil {
		return "no snapshot of the data before the restore was found: " + redo
	}
	if as.Container != "" {
		if st, err := e.Runtime.InspectContainer(ctx, as.Container); err == nil && st.Status == core.StatusRunning {
			return fmt.Sprintf("the service runs again, so its data was not put back: stop it and restore snapshot %s (taken just before) with `docker gordon snapshots restore %s %s`", undo.ID, app, undo.ID)
		}
	}
	if _, err := volsnap.Restore(ctx, e.Engine.Engine.Engine.Engine, app, *undo, as.Spec.Volumes); err != nil {
		return fmt.Sprintf("putting back the data from snapshot %s (taken just before) failed (%v): %s", undo.ID, err, redo)
	}
	e.Log().Info("put back the data of an interrupted restore", "app", app, "service", service, "snapshot", undo.ID)
	return fmt.Sprintf("reconcile put back the data from snapshot %s, taken just before", undo.ID)
}
