package deploy

import (
	"context"
	"errors"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
)

// storeConfigFiles stores the content of spec's project files (SPEC R82)
// by their content-addressed names, before the revision that names them
// is saved; a file stored already is left as is.
func (e *Engine) storeConfigFiles(ctx context.Context, spec core.AppSpec) error {
	for _, s := range spec.Services {
		for _, c := range s.Configs {
			if c.Data == nil {
				continue
			}
			if _, err := e.Store.PutFile(ctx, spec.Name, c.StoreName(), c.Data, c.Mode); err != nil {
				return fmt.Errorf("service %s: store project file %s: %w", s.Name, c.Source, err)
			}
		}
	}
	return nil
}

// configMounts are the read-only bind mounts of spec's project files: each
// stored copy at its path, Mount.Config naming it. A copy missing from the
// state directory wraps ErrNotFound and says to deploy the files again.
func (e *Engine) configMounts(ctx context.Context, app string, spec *core.ServiceSpec) ([]core.Mount, error) {
	var out []core.Mount
	for _, c := range spec.Configs {
		p, err := e.Store.FilePath(ctx, app, c.StoreName())
		if errors.Is(err, core.ErrNotFound) {
			return nil, fmt.Errorf("app %s: service %s: project file %s (for %s) is not in the state directory: deploy the project again with deploy -f, which ships its files: %w",
				app, spec.Name, c.Source, c.Path, err)
		}
		if err != nil {
			return nil, fmt.Errorf("app %s: service %s: project file %s: %w", app, spec.Name, c.Source, err)
		}
		out = append(out, core.Mount{Type: core.MountBind, Source: p, Target: c.Path, ReadOnly: true, Config: c.StoreName()})
	}
	return out, nil
}
