package steps

import (
	"context"
	"errors"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
)

// checkVolumeOwners is R13's volume ownership check for one service: every
// volume it mounts must be absent, or carry this app's and incarnation's
// owner labels, or be adopted explicitly by the manifest (volume.adopt).
// incarnation "" (first deploy, no app record) accepts only absent or
// adopted volumes. Errors wrap ErrConflict and name the owner.
func (e *Engine) CheckVolumeOwners(ctx context.Context, app, incarnation string, s *core.ServiceSpec) error {
	vi, ok := e.Runtime.(core.VolumeInspector)
	if !ok {
		return nil
	}
	for _, v := range s.Volumes {
		if v.Adopt {
			continue
		}
		name := VolumeName(app, v.Name)
		st, err := vi.InspectVolume(ctx, name)
		if errors.Is(err, core.ErrNotFound) {
			continue
		}
		if errors.Is(err, errors.ErrUnsupported) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("inspect volume %s: %w", name, core.WithClass(err, core.ErrUnavailable))
		}
		owner, inc := st.Labels[core.LabelApp], st.Labels[core.LabelIncarnation]
		if st.Labels[core.LabelManaged] == "true" && owner == app && inc != "" && inc == incarnation {
			continue
		}
		who := "no docker gordon owner"
		switch {
		case owner != "" && owner != app:
			who = "app " + owner
		case owner == app && inc != "":
			who = "an earlier incarnation " + inc + " of app " + app
		}
		return fmt.Errorf("%w: volume %s already exists and belongs to %s (set adopt = true on volume %q to take it over, or remove it)",
			core.ErrConflict, name, who, v.Name)
	}
	return nil
}

// checkAppOwner is R13 for the app name itself: every workload container
// labelled for app on the engine must carry this state directory's
// incarnation of it (incarnation "" on a first deploy: none may exist).
// Another incarnation's container means the name is deployed from another
// state directory, whose reconcile would fight this one's; the refusal
// wraps ErrConflict and names a container and its incarnation.
func (e *Engine) CheckAppOwner(ctx context.Context, app, incarnation string) error {
	cs, err := e.Runtime.ListManaged(ctx, map[string]string{core.LabelApp: app, core.LabelRole: "workload"})
	if err != nil {
		return fmt.Errorf("list containers of app %s: %w", app, core.WithClass(err, core.ErrUnavailable))
	}
	for _, c := range cs {
		inc := c.Labels[core.LabelIncarnation]
		if inc != "" && inc == incarnation {
			continue
		}
		return fmt.Errorf("%w: app %s already has container %s on this engine from another state directory (incarnation %q; this one's is %q): deploy it from the state directory that created it (GORDON_STATE_DIR), choose another app name, or remove that app there first",
			core.ErrConflict, app, shortContainerID(c.ID), inc, incarnation)
	}
	return nil
}

// shortContainerID is the first 12 characters of a container ID.
func shortContainerID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
