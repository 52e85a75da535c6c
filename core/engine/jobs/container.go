package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
)

// containerSpec is the spec of the run's container, a new container of
// the generation ACTIVE records for the job's service (rev is the
// revision it runs): the recorded image, the revision's app env with the
// service's env and its secrets as of now, its volumes, binds, project
// files and secret files, its container keys, on the app network and the
// shared networks. It answers to none of the service's names (no alias,
// no port; hostname job-NAME) and has no restart policy; the job's
// command replaces CMD. The secret values are kept for redaction.
func (r *run) containerSpec(ctx context.Context, rev core.Revision) (core.ContainerSpec, error) {
	e, app, j := r.e, r.a.info.Name, r.j
	spec := r.as.Spec
	spec.Name = j.Service
	img, err := e.Runtime.ResolveImage(ctx, r.as.Image)
	if errors.Is(err, core.ErrNotFound) {
		if err = e.Runtime.PullImage(ctx, r.as.Image); err == nil {
			img, err = e.Runtime.ResolveImage(ctx, r.as.Image)
		}
	}
	if err != nil {
		return core.ContainerSpec{}, fmt.Errorf("the serving image %s: %w", r.as.Image, err)
	}
	env, values, err := e.SecretEnv(ctx, nil, app, &spec)
	if err != nil {
		return core.ContainerSpec{}, err
	}
	r.secrets = values
	binds, err := e.ResolveBinds(nil, app, &spec)
	if err != nil {
		return core.ContainerSpec{}, err
	}
	cs := core.ContainerSpec{Name: r.cname, Image: r.as.Image, Env: containerEnv(rev.Spec.Env, spec.Env, env), Hostname: hostname(j.Name),
		Network: steps.NetworkName(app), ExtraNetworks: rev.Spec.Networks, Devices: spec.Devices, StopGrace: steps.EffectiveGrace(spec.StopGrace), Node: spec.Node}
	steps.ApplyContainerKeys(&cs, &spec, img)
	cs.RestartPolicy, cs.Cmd = "", slices.Clone(j.Command)
	for k, v := range map[string]string{core.LabelManaged: "true", core.LabelApp: app, core.LabelService: j.Service, core.LabelIncarnation: r.a.info.Incarnation,
		core.LabelOp: r.op.ID, core.LabelRevision: rev.ID, core.LabelRole: RoleJob, LabelJob: j.Name} {
		cs.Labels[k] = v
	}
	if len(spec.Placement) > 0 {
		cs.Labels[core.LabelPlacement] = strings.Join(spec.Placement, "\n")
	}
	for _, v := range spec.Volumes {
		cs.Mounts = append(cs.Mounts, core.Mount{Type: core.MountVolume, Source: steps.VolumeName(app, v.Name), Target: v.Path, ReadOnly: v.ReadOnly})
	}
	for _, b := range spec.Binds {
		cs.Mounts = append(cs.Mounts, core.Mount{Type: core.MountBind, Source: binds[b.Name], Target: b.Path, ReadOnly: b.ReadOnly})
	}
	for _, c := range spec.Configs {
		p, err := e.Store.FilePath(ctx, app, c.StoreName())
		if err != nil {
			return core.ContainerSpec{}, fmt.Errorf("project file %s (for %s): %w", c.Source, c.Path, err)
		}
		cs.Mounts = append(cs.Mounts, core.Mount{Type: core.MountBind, Source: p, Target: c.Path, ReadOnly: true, Config: c.StoreName()})
	}
	files := steps.SecretFiles(&spec, values)
	for _, fn := range slices.Sorted(maps.Keys(files)) {
		path, err := e.Store.WriteContainerSecret(ctx, app, r.cname, fn, files[fn])
		if err != nil {
			return core.ContainerSpec{}, fmt.Errorf("write secret file %s: %w", fn, err)
		}
		cs.Mounts = append(cs.Mounts, core.Mount{Type: core.MountBind, Source: path, Target: "/run/secrets/" + fn, ReadOnly: true, Secret: fn})
	}
	return cs, nil
}

// containerEnv is the app's env, then the service's, then its secrets,
// each overriding the one before, as KEY=value sorted by key.
func containerEnv(app, svc, secrets map[string]string) []string {
	m := maps.Clone(app)
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, svc)
	maps.Copy(m, secrets)
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}
