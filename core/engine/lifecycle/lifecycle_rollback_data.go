package lifecycle

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/volsnap"
)

// rollbackData is what a rollback does with the data of the services
// that have volumes (docs/data.md). For each such service it looks for
// the snapshot taken before the op that activated its serving generation
// (the deploy being rolled back). With withData it returns service →
// snapshot for the deploy to restore, and refuses (nothing changed) when
// a service has none or the engine cannot restore. Without it the data
// stays as it is, and each service that has such a snapshot gets a
// warning naming it and how to restore it.
func (e *Engine) rollbackData(app string, active core.Active, withData bool) (map[string]string, []core.Warning, error) {
	se := e.Engine.Engine.Engine
	restore := map[string]string{}
	var warnings []core.Warning
	for _, name := range slices.Sorted(maps.Keys(active.Services)) {
		svc := active.Services[name]
		if svc == nil || len(svc.Spec.Volumes) == 0 {
			continue
		}
		m, err := volsnap.BeforeDeploy(se, app, name, svc.ActivatedBy)
		switch {
		case err == nil && withData:
			restore[name] = m.ID
		case err == nil:
			warnings = append(warnings, core.Warning{Service: name, Detail: fmt.Sprintf(
				"the rollback restored the code, not the data: the volumes keep what they hold now. Snapshot %s, taken before the deploy rolled back (op %s), holds the data from before it: `docker gordon snapshots restore %s %s` restores it (next time, `rollback --with-data` restores it with the code)",
				m.ID, svc.ActivatedBy, app, m.ID)})
		case !withData:
		case errors.Is(err, core.ErrNotFound):
			return nil, nil, fmt.Errorf("%w: rollback %s --with-data: service %s has no snapshot taken before the deploy being rolled back (op %s), so its data cannot be restored; nothing was changed. `docker gordon snapshots ls %s` lists the snapshots; roll back without --with-data to keep the data as it is",
				core.ErrConflict, app, name, svc.ActivatedBy, app)
		default:
			return nil, nil, fmt.Errorf("rollback %s --with-data: %w; nothing was changed", app, err)
		}
	}
	if !withData {
		return nil, warnings, nil
	}
	if len(restore) == 0 {
		return nil, nil, fmt.Errorf("%w: rollback %s --with-data: no service of the app has a volume, so there is no data to restore; nothing was changed. Roll back without --with-data", core.ErrInvalid, app)
	}
	if err := volsnap.CanRestore(se); err != nil {
		return nil, nil, fmt.Errorf("rollback %s --with-data: %w; nothing was changed", app, err)
	}
	return restore, nil, nil
}
