package docker

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// EnvVolumeWipe names the directory a volume helper container empties (its
// entries, not itself) before a snapshot is restored into it; see
// probehelper.RunIfRequested.
const EnvVolumeWipe = "GORDON_VOLUME_WIPE"

// labelHelperVolume names, on a volume helper container, the volume it
// restores into.
const labelHelperVolume = "dev.gordon.volume"

// removeStaleHelpers removes the stopped volume helpers of volume a dead
// process left (a CLI killed during a restore): they pin the volume
// (`docker volume rm` refuses it). Restores of one volume never run side
// by side (they hold its app's lock), so a stopped helper of the volume is
// never another restore's. Failures are ignored: the restore goes on.
func (r *Runtime) removeStaleHelpers(ctx context.Context, volume string) {
	f := labelFilters(map[string]string{core.LabelRole: "volume-helper", labelHelperVolume: volume}).Add("status", "exited").Add("status", "created")
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return
	}
	for _, c := range res.Items {
		_, _ = r.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
}

// volumeMount is where the volume helper mounts the volume it restores.
const volumeMount = "/gordon-volume"

// ExportVolume implements the engine's snapshot.Archiver with the engine's archive
// API (GET /containers/{id}/archive) on the stopped container: nothing is
// pulled and nothing runs. The engine's tar names every entry under the
// mount path's base name; ExportVolume rewrites the names relative to the
// volume's root and drops the root's own entry. A running container is
// refused (core.ErrConflict): its volume is not quiet.
func (r *Runtime) ExportVolume(ctx context.Context, id, path string, w io.Writer) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("export the volume at %s of container %s", path, short(id))
	ins, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return r.classify(err, what)
	}
	if st := ins.Container.State; st != nil && st.Running {
		return fmt.Errorf("%s: %w: the container is running; stop it first so the volume is quiet", what, core.ErrConflict)
	}
	res, err := r.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return r.classify(err, what)
	}
	defer res.Content.Close()
	if err := stripRoot(tar.NewReader(res.Content), w); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// stripRoot copies the tar in to w with the first path component of every
// name removed; the root's own entry is dropped.
func stripRoot(in *tar.Reader, w io.Writer) error {
	out := tar.NewWriter(w)
	for {
		h, err := in.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the engine's archive: %w", err)
		}
		_, rest, ok := strings.Cut(strings.TrimPrefix(h.Name, "./"), "/")
		if !ok || strings.Trim(rest, "/") == "" {
			continue
		}
		h.Name = rest
		if h.Typeflag == tar.TypeLink {
			if _, lrest, ok := strings.Cut(strings.TrimPrefix(h.Linkname, "./"), "/"); ok {
				h.Linkname = lrest
			}
		}
		if err := out.WriteHeader(h); err != nil {
			return fmt.Errorf("write %s: %w", h.Name, err)
		}
		if _, err := io.Copy(out, in); err != nil {
			return fmt.Errorf("copy %s: %w", h.Name, err)
		}
	}
	return out.Close()
}

// RestoreVolume implements the engine's snapshot.Archiver. A short-lived helper
// container of the FROM-scratch helper image (the probe helper's, built
// from this binary, so nothing is pulled) mounts the volume and empties it,
// then the tar is extracted into it through the archive API (PUT
// /containers/{id}/archive) with the owners the tar records; the helper is
// removed. A missing volume wraps core.ErrNotFound.
func (r *Runtime) RestoreVolume(ctx context.Context, volume string, rd io.Reader) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("restore volume %s", volume)
	if _, err := r.cli.VolumeInspect(ctx, volume, client.VolumeInspectOptions{}); err != nil {
		return r.classify(err, what)
	}
	img, err := r.helperImage(ctx)
	if err != nil {
		return fmt.Errorf("%s: helper image: %w", what, err)
	}
	r.removeStaleHelpers(ctx, volume)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	created, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   "gordon-volume-" + hex.EncodeToString(suffix),
		Config: &container.Config{Image: img, Env: []string{EnvVolumeWipe + "=" + volumeMount}, Labels: map[string]string{core.LabelManaged: "true", core.LabelRole: "volume-helper", labelHelperVolume: volume}},
		HostConfig: &container.HostConfig{NetworkMode: "none", LogConfig: container.LogConfig{Type: "json-file"},
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: volume, Target: volumeMount}}},
	})
	if err != nil {
		return r.classify(err, what+": create the helper")
	}
	id := created.ID
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = r.cli.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true})
	}()
	wait := r.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := r.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return r.classify(err, what+": start the helper")
	}
	select {
	case res := <-wait.Result:
		if res.StatusCode != 0 {
			return fmt.Errorf("%s: %w: emptying the volume failed (exit status %d); see `docker logs %s`", what, core.ErrUnavailable, res.StatusCode, short(id))
		}
	case err := <-wait.Error:
		return r.classify(err, what+": wait for the helper")
	case <-ctx.Done():
		return ctx.Err()
	}
	if _, err := r.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: volumeMount, Content: rd, AllowOverwriteDirWithFile: true}); err != nil {
		return r.classify(err, what+": extract the snapshot")
	}
	return nil
}
