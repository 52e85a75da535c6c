package volsnap

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// Restore replaces the content of the service's named volumes with
// snapshot m's (what the snapshot does not hold is deleted), volume by
// volume; no container of the service may run meanwhile (the caller
// stopped it). Each volume of m goes into the volume of mounts (the
// service's named volumes) mounted at the same path, named for app
// (Targets): never into the volume name the manifest records, which an
// imported snapshot brings from elsewhere. A damaged snapshot (digest
// mismatch) fails at the volume it damages. The returned record has the
// sizes restored.
func Restore(ctx context.Context, e *steps.Engine, app string, m snapshot.Manifest, mounts []core.VolumeMount) (Record, error) {
	start := time.Now()
	if err := CanRestore(e); err != nil {
		return Record{}, err
	}
	if m.IsDump() {
		return Record{}, DumpNotRestorable(m)
	}
	into, err := Targets(app, m, mounts)
	if err != nil {
		return Record{}, err
	}
	va := e.Runtime.(snapshot.Archiver)
	for i, v := range m.Volumes {
		r, _, err := e.Snapshots.OpenVolume(m.App, m.ID, v.Name)
		if err != nil {
			return Record{}, err
		}
		err = va.RestoreVolume(ctx, into[i], r)
		r.Close()
		if err != nil {
			return Record{}, fmt.Errorf("restore volume %s from snapshot %s: %w", into[i], m.ID, err)
		}
	}
	rec := RecordOf(m)
	rec.Duration = core.Duration(time.Since(start))
	return rec, nil
}

// Targets names, for each volume of m in order, the volume it is restored
// into: the one of mounts (the service's named volumes) at the same path,
// named for app. A volume of m at a path the service does not mount is
// refused (core.ErrInvalid) before anything changes.
func Targets(app string, m snapshot.Manifest, mounts []core.VolumeMount) ([]string, error) {
	into := make([]string, len(m.Volumes))
	for i, v := range m.Volumes {
		for _, mt := range mounts {
			if path.Clean(mt.Path) == path.Clean(v.Path) {
				into[i] = steps.VolumeName(app, mt.Name)
			}
		}
		if into[i] == "" {
			return nil, fmt.Errorf("%w: snapshot %s holds a volume mounted at %s, and service %s of app %s mounts no named volume there, so it cannot be restored into it; restore it into an app whose service mounts a volume at that path",
				core.ErrInvalid, m.ID, v.Path, m.Service, app)
		}
	}
	return into, nil
}

// CanRestore refuses (core.ErrUnavailable) an engine without a snapshot
// store or a runtime that cannot write volumes, before anything changes.
func CanRestore(e *steps.Engine) error {
	if e.Snapshots == nil {
		return fmt.Errorf("%w: this engine keeps no snapshots", core.ErrUnavailable)
	}
	if _, ok := e.Runtime.(snapshot.Archiver); !ok {
		return fmt.Errorf("%w: this container runtime cannot write volumes", core.ErrUnavailable)
	}
	return nil
}

// BeforeDeploy returns the snapshot taken before the op that activated
// the service's serving generation (the deploy a rollback undoes), or an
// error wrapping core.ErrNotFound when there is none.
func BeforeDeploy(e *steps.Engine, app, service, op string) (snapshot.Manifest, error) {
	if e.Snapshots == nil {
		return snapshot.Manifest{}, fmt.Errorf("%w: this engine keeps no snapshots", core.ErrNotFound)
	}
	all, err := e.Snapshots.List(app)
	if err != nil {
		return snapshot.Manifest{}, err
	}
	for i := len(all) - 1; i >= 0; i-- {
		m := all[i]
		if m.Service == service && m.Trigger == snapshot.TriggerDeploy && m.Op == op {
			return m, nil
		}
	}
	return snapshot.Manifest{}, fmt.Errorf("service %s: %w: no snapshot was taken before op %s", service, core.ErrNotFound, op)
}

// IsUnsupported reports a runtime answer that it cannot do it.
func IsUnsupported(err error) bool { return errors.Is(err, errors.ErrUnsupported) }
