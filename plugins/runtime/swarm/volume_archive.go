package swarm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/volxfer"
)

// Volume snapshots on a swarm (the engine's snapshot.Archiver; docs/data.md,
// docs/swarm.md). A named volume lives on the node whose engine created it,
// and only the manager's engine API is reachable, so the volume's tar is
// moved by a one-shot helper service on that node: the edge's image (every
// node can run it) running `gordon-edge volume-helper`, pinned to the
// node, the volume mounted at volxfer.MountPath, attached to the control
// network only. It dials this process on its address on the control
// network, over TLS with a certificate and a token made for that one
// transfer (internal/volxfer): the overlay is not encrypted, and the data
// never passes through a log. This process must therefore run in a
// container of the manager's engine attached to Options.EdgeNetwork (the
// runner, the reconcile loop); anywhere else the archive calls wrap
// errors.ErrUnsupported.

// roleVolumeHelper is the helper service's core.LabelRole.
const roleVolumeHelper = "volume-helper"

// ExportVolume implements the engine's snapshot.Archiver: it writes to w a
// tar of the named volume mounted at path in instance id (a service ID),
// read on the node the instance is pinned to, in the docker runtime's
// format (volxfer.WriteTar). A running instance is refused
// (core.ErrConflict); an instance with no volume at path wraps
// core.ErrNotFound; a node that is down, a helper that fails or cannot
// reach this process wrap core.ErrUnavailable; w's error is returned
// wrapped; outside a container on the control network the error wraps
// errors.ErrUnsupported.
func (r *Runtime) ExportVolume(ctx context.Context, id, p string, w io.Writer) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("export the volume at %s of swarm instance %s", p, short(id))
	svc, err := r.service(ctx, id, what)
	if err != nil {
		return err
	}
	m, ok := volumeAt(svc, p)
	if !ok {
		return fmt.Errorf("%s: %w: the instance mounts no named volume there", what, core.ErrNotFound)
	}
	tasks, err := r.tasks(ctx, id)
	if err != nil {
		return r.classify(err, what)
	}
	if replicas(svc) > 0 || anyLive(tasks) {
		return fmt.Errorf("%s: %w: the instance is running; stop it first so the volume is quiet", what, core.ErrConflict)
	}
	node := pinnedNode(svc)
	if node == "" {
		return fmt.Errorf("%s: %w: the instance is pinned to no node, so the node that holds volume %s is not known", what, core.ErrUnavailable, m.Source)
	}
	return r.transfer(ctx, what, m, node, volxfer.ModeExport, func(c *volxfer.Conn) error { return c.Receive(w) })
}

// RestoreVolume implements the engine's snapshot.Archiver: it empties the
// named volume on the node it lives on and extracts the tar of rd into it
// (volxfer.Extract). The node is the one of the newest gordon service that
// mounts the volume; none wraps core.ErrNotFound. Failures are as
// ExportVolume's; an error reading rd is returned wrapped.
func (r *Runtime) RestoreVolume(ctx context.Context, volume string, rd io.Reader) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("restore volume %s", volume)
	res, err := r.cli.ServiceList(ctx, client.ServiceListOptions{Filters: make(client.Filters).Add("label", core.LabelManaged+"=true")})
	if err != nil {
		return r.classify(err, what+": list the services")
	}
	m, node := volumeNode(res.Items, volume)
	if node == "" {
		return fmt.Errorf("%s: %w: no gordon service of this swarm mounts it, so the node that holds it is not known", what, core.ErrNotFound)
	}
	return r.transfer(ctx, what, m, node, volxfer.ModeRestore, func(c *volxfer.Conn) error { return c.Send(rd) })
}

// volumeAt is svc's named-volume mount at target p.
func volumeAt(svc swarm.Service, p string) (mount.Mount, bool) {
	cs := svc.Spec.TaskTemplate.ContainerSpec
	if cs == nil {
		return mount.Mount{}, false
	}
	for _, m := range cs.Mounts {
		if m.Type == mount.TypeVolume && m.Source != "" && path.Clean(m.Target) == path.Clean(p) {
			return m, true
		}
	}
	return mount.Mount{}, false
}

// volumeNode is the mount of volume and the node of the newest service
// of svcs that mounts it and is pinned ("" when none).
func volumeNode(svcs []swarm.Service, volume string) (mount.Mount, string) {
	var best swarm.Service
	var bm mount.Mount
	node := ""
	for _, s := range svcs {
		n := pinnedNode(s)
		if n == "" || s.Spec.TaskTemplate.ContainerSpec == nil {
			continue
		}
		for _, m := range s.Spec.TaskTemplate.ContainerSpec.Mounts {
			if m.Type == mount.TypeVolume && m.Source == volume && (node == "" || s.CreatedAt.After(best.CreatedAt)) {
				best, bm, node = s, m, n
			}
		}
	}
	return bm, node
}

// pinnedNode is the node ID svc is pinned to: its LabelNode label, else
// its node.id constraint ("" when neither).
func pinnedNode(svc swarm.Service) string {
	if n := svc.Spec.Labels[LabelNode]; n != "" {
		return n
	}
	if p := svc.Spec.TaskTemplate.Placement; p != nil {
		for _, c := range p.Constraints {
			k, v, ok := strings.Cut(strings.ReplaceAll(c, " ", ""), "==")
			if ok && k == "node.id" && v != "" {
				return v
			}
		}
	}
	return ""
}

func replicas(svc swarm.Service) uint64 {
	if rs := svc.Spec.Mode.Replicated; rs != nil && rs.Replicas != nil {
		return *rs.Replicas
	}
	return 0
}

func anyLive(tasks []swarm.Task) bool {
	for _, t := range tasks {
		if live(t) {
			return true
		}
	}
	return false
}

// controlAddr is this process's address on the control network and that
// network's ID: its own container's (found by its hostname) when that is
// a container of the manager's engine attached to Options.EdgeNetwork;
// else an error wrapping errors.ErrUnsupported.
func (r *Runtime) controlAddr(ctx context.Context, what string) (ip, netID string, err error) {
	unsupported := func(why string) error {
		return fmt.Errorf("%s: %w: volume snapshots on a swarm are taken by the runner on the manager (docker gordon runs every verb there); %s",
			what, errors.ErrUnsupported, why)
	}
	if r.opts.EdgeNetwork == "" {
		return "", "", unsupported("no control network is set (" + EnvEdgeNetwork + ")")
	}
	self, err := os.Hostname()
	if err != nil {
		return "", "", unsupported("this process has no hostname")
	}
	ins, err := r.cli.ContainerInspect(ctx, self, client.ContainerInspectOptions{})
	if err != nil || ins.Container.NetworkSettings == nil {
		return "", "", unsupported("this process does not run in a container of the manager's engine")
	}
	ep := ins.Container.NetworkSettings.Networks[r.opts.EdgeNetwork]
	if ep == nil || !ep.IPAddress.IsValid() {
		return "", "", unsupported("its container is not attached to the control network " + r.opts.EdgeNetwork)
	}
	return ep.IPAddress.String(), ep.NetworkID, nil
}

// edgeImage is the image of the edge service, which every node can run.
func (r *Runtime) edgeImage(ctx context.Context, what string) (string, error) {
	if r.opts.EdgeService == "" {
		return "", fmt.Errorf("%s: %w: no edge service is set (%s), whose image the volume helper runs", what, errors.ErrUnsupported, EnvEdgeService)
	}
	res, err := r.cli.ServiceInspect(ctx, r.opts.EdgeService, client.ServiceInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("%s: %w: the edge service %s is not running, and the volume helper runs its image: start it with docker gordon system start",
			what, core.ErrUnavailable, r.opts.EdgeService)
	}
	if err != nil {
		return "", r.classify(err, what+": inspect the edge service")
	}
	cs := res.Service.Spec.TaskTemplate.ContainerSpec
	if cs == nil || cs.Image == "" {
		return "", fmt.Errorf("%s: %w: the edge service %s has no image", what, core.ErrUnavailable, r.opts.EdgeService)
	}
	return cs.Image, nil
}
