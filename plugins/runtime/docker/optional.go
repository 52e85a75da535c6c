package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

var (
	_ core.VolumeInspector     = (*Runtime)(nil)
	_ core.NetworkRemover      = (*Runtime)(nil)
	_ core.RestartPolicySetter = (*Runtime)(nil)
)

// InspectVolume returns the named volume's labels (SPEC R13 owner check);
// an absent volume wraps core.ErrNotFound.
func (r *Runtime) InspectVolume(ctx context.Context, name string) (core.VolumeState, error) {
	if err := r.connect(ctx); err != nil {
		return core.VolumeState{}, err
	}
	res, err := r.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if err != nil {
		return core.VolumeState{}, r.classify(err, fmt.Sprintf("inspect volume %q", name))
	}
	return core.VolumeState{Name: res.Volume.Name, Labels: res.Volume.Labels}, nil
}

// RemoveNetwork removes the network with exactly this name (SPEC R55);
// an absent network is success. A network with containers still attached
// is refused by the engine (core.ErrConflict).
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	id, err := r.findNetwork(ctx, name)
	if err != nil || id == "" {
		return err
	}
	if _, err := r.cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return r.classify(err, fmt.Sprintf("remove network %q", name))
	}
	return nil
}

// SetRestartPolicy sets the restart policy of container id (SPEC R59) with
// the engine's container update; policy is "" or "no" (none),
// "unless-stopped", "always" or "on-failure" (else core.ErrInvalid). A
// missing container wraps core.ErrNotFound.
func (r *Runtime) SetRestartPolicy(ctx context.Context, id, policy string) error {
	rp, err := restartPolicy(policy)
	if err != nil {
		return err
	}
	if err := r.connect(ctx); err != nil {
		return err
	}
	if _, err := r.cli.ContainerUpdate(ctx, id, client.ContainerUpdateOptions{RestartPolicy: &rp}); err != nil {
		return r.classify(err, fmt.Sprintf("set restart policy of container %s", short(id)))
	}
	return nil
}

// restartPolicy is the engine's form of a ContainerSpec.RestartPolicy.
func restartPolicy(policy string) (container.RestartPolicy, error) {
	switch policy {
	case "", "no":
		return container.RestartPolicy{Name: container.RestartPolicyDisabled}, nil
	case "unless-stopped", "always", "on-failure":
		return container.RestartPolicy{Name: container.RestartPolicyMode(policy)}, nil
	}
	return container.RestartPolicy{}, fmt.Errorf("%w: unknown restart policy %q", core.ErrInvalid, policy)
}
