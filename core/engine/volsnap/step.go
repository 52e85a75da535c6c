package volsnap

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// Journal is the op a data step is journaled in, and how to save it (a
// failed save is the caller's to log). A step appended to Op.Steps may
// move the slice: callers holding a *core.Step into it fetch it again.
type Journal struct {
	Op   *core.Operation
	Save func()
}

func (j Journal) begin(e *steps.Engine, id, service, detail string) int {
	now := e.Now()
	j.Op.Steps = append(j.Op.Steps, core.Step{ID: id, State: core.StepPending, Service: service, Detail: detail, StartedAt: now, UpdatedAt: now})
	j.Save()
	return len(j.Op.Steps) - 1
}

func (j Journal) end(e *steps.Engine, i int, rec *Record, detail string, err error) {
	st := &j.Op.Steps[i]
	st.UpdatedAt = e.Now()
	if rec != nil {
		st.Digest = strings.Join(rec.Digests, " ")
		st.Phases = map[string]core.Duration{"data": rec.Duration}
	}
	if err != nil {
		st.State, st.Error = core.StepFailed, err.Error()
	} else {
		st.State = core.StepSucceeded
		if detail != "" {
			st.Detail = detail
		}
	}
	j.Save()
}

// TakeStep is Take journaled as step service.<service>.snapshot (pending
// while it runs, then succeeded with its record, or failed). It returns
// the snapshot (nil when none was taken: Result.Warning says why).
func TakeStep(ctx context.Context, e *steps.Engine, j Journal, req Request) (*snapshot.Manifest, Result, error) {
	i := j.begin(e, steps.SnapshotStepID(req.Service), req.Service, "snapshot of the volumes of "+readiness.ShortID(req.Container))
	res, err := Take(ctx, e, req)
	if err != nil {
		j.end(e, i, nil, "", err)
		return nil, res, err
	}
	if res.Manifest.ID == "" {
		j.end(e, i, &res.Record, "no snapshot: "+res.Record.Skipped, nil)
		return nil, res, nil
	}
	j.end(e, i, &res.Record, fmt.Sprintf("snapshot %s: %d volume(s), %d bytes (%d stored) in %s", res.Manifest.ID, len(res.Manifest.Volumes),
		res.Record.Size, res.Record.Stored, res.Record.Duration.D().Round(time.Millisecond)), nil)
	return &res.Manifest, res, nil
}

// RestoreStep is Restore of snapshot id of app into the service's named
// volumes (mounts) journaled as step service.<service>.restore. When it
// fails and undo is not nil, undo (the snapshot taken just before) is
// restored, and the error says how that went.
func RestoreStep(ctx context.Context, e *steps.Engine, j Journal, app, service, id string, mounts []core.VolumeMount, undo *snapshot.Manifest) error {
	i := j.begin(e, steps.RestoreStepID(service), service, "restore snapshot "+id)
	m, err := e.Snapshots.Get(app, id)
	var rec Record
	if err == nil {
		rec, err = Restore(ctx, e, app, m, mounts)
	}
	if err != nil {
		err = fmt.Errorf("restoring snapshot %s failed: %w", id, err)
		if undo != nil {
			if _, back := Restore(context.WithoutCancel(ctx), e, app, *undo, mounts); back != nil {
				err = fmt.Errorf("%w; putting back the data from snapshot %s failed too (%v): restore a snapshot with `docker gordon snapshots restore %s ID`", err, undo.ID, back, app)
			} else {
				err = fmt.Errorf("%w; the data was put back from snapshot %s", err, undo.ID)
			}
		}
		j.end(e, i, nil, "", err)
		return err
	}
	j.end(e, i, &rec, fmt.Sprintf("restored snapshot %s: %d bytes in %s", id, rec.Size, rec.Duration.D().Round(time.Millisecond)), nil)
	return nil
}
