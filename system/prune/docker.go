// Package prune is `docker gordon prune`'s view of one Docker engine: the
// Docker API implementation of the engine's prune.Objects (built images,
// networks, volumes, the images containers use).
package prune

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/prune"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
)

// Docker implements prune.Objects on a Docker engine.
type Docker struct {
	API client.APIClient
}

var _ prune.Objects = Docker{}

// ImagesInUse implements prune.Objects: the image ID of every container.
func (d Docker) ImagesInUse(ctx context.Context) (map[string]bool, error) {
	res, err := d.API.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return nil, dockererr.Classify(err)
	}
	out := map[string]bool{}
	for _, c := range res.Items {
		out[c.ImageID] = true
	}
	return out, nil
}

// BuiltImages implements prune.Objects.
func (d Docker) BuiltImages(ctx context.Context) ([]prune.Image, error) {
	f := make(client.Filters).Add("label", core.LabelManaged+"=true").Add("label", core.LabelRole+"="+prune.RoleBuild)
	res, err := d.API.ImageList(ctx, client.ImageListOptions{Filters: f})
	if err != nil {
		return nil, dockererr.Classify(err)
	}
	var out []prune.Image
	for _, im := range res.Items {
		var tags []string
		for _, t := range im.RepoTags {
			if t != "<none>:<none>" {
				tags = append(tags, t)
			}
		}
		out = append(out, prune.Image{ID: im.ID, Tags: tags, Labels: im.Labels})
	}
	return out, nil
}

// ImageID implements prune.Objects.
func (d Docker) ImageID(ctx context.Context, ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	res, err := d.API.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", dockererr.Classify(err)
	}
	return res.ID, nil
}

// RemoveImage implements prune.Objects: each tag, then the image by ID
// when it had none.
func (d Docker) RemoveImage(ctx context.Context, im prune.Image) error {
	refs := im.Tags
	if len(refs) == 0 {
		refs = []string{im.ID}
	}
	for _, ref := range refs {
		if _, err := d.API.ImageRemove(ctx, ref, client.ImageRemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove %s: %w", ref, dockererr.Classify(err))
		}
	}
	return nil
}

// Networks implements prune.Objects.
func (d Docker) Networks(ctx context.Context, app string) ([]prune.Network, error) {
	res, err := d.API.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", core.LabelApp+"="+app)})
	if err != nil {
		return nil, dockererr.Classify(err)
	}
	var out []prune.Network
	for _, n := range res.Items {
		in, err := d.API.NetworkInspect(ctx, n.ID, client.NetworkInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, dockererr.Classify(err)
		}
		out = append(out, prune.Network{Name: n.Name, Labels: n.Labels, Containers: len(in.Network.Containers)})
	}
	return out, nil
}

// RemoveNetwork implements prune.Objects.
func (d Docker) RemoveNetwork(ctx context.Context, name string) error {
	if _, err := d.API.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return dockererr.Classify(err)
	}
	return nil
}

// Volumes implements prune.Objects.
func (d Docker) Volumes(ctx context.Context, app string) ([]prune.Volume, error) {
	res, err := d.API.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", core.LabelApp+"="+app)})
	if err != nil {
		return nil, dockererr.Classify(err)
	}
	var out []prune.Volume
	for _, v := range res.Items {
		out = append(out, prune.Volume{Name: v.Name, Labels: v.Labels})
	}
	return out, nil
}
