package swarm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Project files (SPEC R82). On one engine a project file is the stored
// content-addressed copy in the state directory, bind-mounted read-only
// (core.Mount.Config names it). A task may run on another machine, so on
// a swarm each becomes a Docker config named gordon-<app>-<first 24 hex
// of its sha256> (labels dev.gordon.managed=true and dev.gordon.app):
// content-addressed, so a changed file is a new config and an unchanged
// one is reused. It is created when absent and referenced by the service
// at the mount's target with the copy's mode (uid and gid 0).
// RemoveContainer removes the configs the service referenced once no
// other service references them.

// maxConfigSize is Swarm's bound on a config's data (1000 KiB).
const maxConfigSize = 1000 * 1024

// configFile is one project file an instance references.
type configFile struct {
	name   string // the Docker config's name
	data   []byte
	target string
	mode   os.FileMode
}

// configName is gordon-<app>-<24 hex of the digest>, within Swarm's 64
// characters (the app is cut when longer); storeName is
// core.ConfigFile.StoreName ("<digest>-<mode>").
func configName(app, storeName string) string {
	digest, _, _ := strings.Cut(storeName, "-")
	if len(digest) > 24 {
		digest = digest[:24]
	}
	head := "gordon-" + app
	if max := 64 - 1 - len(digest); len(head) > max {
		head = head[:max]
	}
	return head + "-" + digest
}

// configFiles reads the project files among c's mounts (the stored
// copies): content, target and mode. A missing copy wraps
// core.ErrNotFound; content over Swarm's bound core.ErrInvalid.
func configFiles(c core.ContainerSpec) ([]configFile, error) {
	var out []configFile
	app := c.Labels[core.LabelApp]
	for _, m := range c.Mounts {
		if m.Config == "" {
			continue
		}
		data, err := os.ReadFile(m.Source)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("project file for %s: %w: its stored copy %s is gone (deploy -f again)", m.Target, core.ErrNotFound, m.Source)
		}
		if err != nil {
			return nil, fmt.Errorf("project file for %s: %w: %w", m.Target, core.ErrUnavailable, err)
		}
		if len(data) > maxConfigSize {
			return nil, fmt.Errorf("project file for %s: %w: %d bytes; a Docker config holds at most 1000 KiB", m.Target, core.ErrInvalid, len(data))
		}
		st, err := os.Stat(m.Source)
		if err != nil {
			return nil, fmt.Errorf("project file for %s: %w: %w", m.Target, core.ErrUnavailable, err)
		}
		out = append(out, configFile{name: configName(app, m.Config), data: data, target: m.Target, mode: st.Mode().Perm()})
	}
	return out, nil
}

// ensureConfigs creates the Docker configs of c's project files that do
// not exist yet and returns the service's references to them.
func (r *Runtime) ensureConfigs(ctx context.Context, c core.ContainerSpec, what string) ([]*swarm.ConfigReference, error) {
	files, err := configFiles(c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var refs []*swarm.ConfigReference
	for _, f := range files {
		id, err := r.findConfig(ctx, f.name, what)
		if err != nil {
			return nil, err
		}
		if id == "" {
			res, cerr := r.cli.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{
				Annotations: swarm.Annotations{Name: f.name, Labels: map[string]string{core.LabelManaged: "true", core.LabelApp: c.Labels[core.LabelApp]}},
				Data:        f.data,
			}})
			if cerr != nil {
				if id, err = r.findConfig(ctx, f.name, what); err != nil || id == "" { // lost a race: take theirs
					return nil, r.classify(cerr, what+": create config "+f.name)
				}
			} else {
				id = res.ID
			}
		}
		refs = append(refs, &swarm.ConfigReference{ConfigID: id, ConfigName: f.name,
			File: &swarm.ConfigReferenceFileTarget{Name: f.target, UID: "0", GID: "0", Mode: f.mode}})
	}
	return refs, nil
}

// findConfig returns the ID of the config named exactly name ("" when
// absent).
func (r *Runtime) findConfig(ctx context.Context, name, what string) (string, error) {
	res, err := r.cli.ConfigList(ctx, client.ConfigListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		return "", r.classify(err, what+": list configs")
	}
	for _, s := range res.Items {
		if s.Spec.Name == name {
			return s.ID, nil
		}
	}
	return "", nil
}

// dropConfigs removes the gordon-managed configs among refs (those of a
// service just removed) that no remaining service references. A config
// Swarm still finds in use, or already gone, is left alone.
func (r *Runtime) dropConfigs(ctx context.Context, refs []*swarm.ConfigReference, what string) error {
	if len(refs) == 0 {
		return nil
	}
	managed, err := r.cli.ConfigList(ctx, client.ConfigListOptions{Filters: make(client.Filters).Add("label", core.LabelManaged+"=true")})
	if err != nil {
		return r.classify(err, what+": list configs")
	}
	svcs, err := r.cli.ServiceList(ctx, client.ServiceListOptions{})
	if err != nil {
		return r.classify(err, what+": list services")
	}
	ours := map[string]bool{}
	for _, c := range managed.Items {
		ours[c.ID] = true
	}
	used := map[string]bool{}
	for _, s := range svcs.Items {
		if cs := s.Spec.TaskTemplate.ContainerSpec; cs != nil {
			for _, ref := range cs.Configs {
				used[ref.ConfigID] = true
			}
		}
	}
	var errs []error
	for _, ref := range refs {
		if ref == nil || !ours[ref.ConfigID] || used[ref.ConfigID] {
			continue
		}
		used[ref.ConfigID] = true // once
		_, err := r.cli.ConfigRemove(ctx, ref.ConfigID, client.ConfigRemoveOptions{})
		if err != nil && !cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "in use") {
			errs = append(errs, r.classify(err, what+": remove config "+short(ref.ConfigID)))
		}
	}
	return errors.Join(errs...)
}
