package coretest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// Method names of ArchiveRuntime for Fail and Calls.
const (
	MExportVolume  = "export-volume"
	MRestoreVolume = "restore-volume"
)

// ArchiveRuntime is the fake Runtime with snapshot.Archiver: a volume's
// content is a byte string (Volumes, keyed by the engine's volume name).
// ExportVolume writes the content of the volume a container mounts at a
// path (its created spec's mounts, or Mount for a seeded container) and
// refuses a running container (ErrConflict); RestoreVolume replaces a
// volume's content. Events: export-volume (id, detail path), then
// restore-volume (volume name). Wrap a harness's Runtime with it and set
// Engine.Runtime.
type ArchiveRuntime struct {
	*Runtime
	amu     *sync.Mutex
	volumes map[string][]byte
	mounts  map[string]string // container + "\x00" + path → volume
}

var _ snapshot.Archiver = ArchiveRuntime{}

// NewArchiveRuntime wraps r.
func NewArchiveRuntime(r *Runtime) ArchiveRuntime {
	return ArchiveRuntime{Runtime: r, amu: &sync.Mutex{}, volumes: map[string][]byte{}, mounts: map[string]string{}}
}

// SetVolume sets the content of volume name.
func (a ArchiveRuntime) SetVolume(name string, data []byte) {
	a.amu.Lock()
	defer a.amu.Unlock()
	a.volumes[name] = bytes.Clone(data)
}

// Volume returns the content of volume name.
func (a ArchiveRuntime) Volume(name string) []byte {
	a.amu.Lock()
	defer a.amu.Unlock()
	return bytes.Clone(a.volumes[name])
}

// Mount says that container id mounts volume at path (for a seeded
// container, which has no created spec).
func (a ArchiveRuntime) Mount(id, path, volume string) {
	a.amu.Lock()
	defer a.amu.Unlock()
	a.mounts[id+"\x00"+path] = volume
}

// ExportVolume implements snapshot.Archiver.
func (a ArchiveRuntime) ExportVolume(ctx context.Context, id, path string, w io.Writer) error {
	if err := a.begin(ctx, MExportVolume, id); err != nil {
		return err
	}
	a.mu.Lock()
	c, ok := a.cs[id]
	var running bool
	var vol string
	if ok {
		running = c.state.Status == core.StatusRunning
		for _, m := range c.spec.Mounts {
			if m.Target == path && m.Type == core.MountVolume {
				vol = m.Source
			}
		}
	}
	a.mu.Unlock()
	if !ok {
		return notFound(id)
	}
	if running {
		return fmt.Errorf("export volume of %s: %w: the container is running", id, core.ErrConflict)
	}
	a.amu.Lock()
	if v, ok := a.mounts[id+"\x00"+path]; ok {
		vol = v
	}
	data := bytes.Clone(a.volumes[vol])
	a.amu.Unlock()
	if vol == "" {
		return fmt.Errorf("export volume of %s: %w: no volume at %s", id, core.ErrNotFound, path)
	}
	a.ev.AddDetail(MExportVolume, id, path)
	_, err := w.Write(data)
	return err
}

// RestoreVolume implements snapshot.Archiver.
func (a ArchiveRuntime) RestoreVolume(ctx context.Context, volume string, r io.Reader) error {
	if err := a.begin(ctx, MRestoreVolume, volume); err != nil {
		return err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	a.SetVolume(volume, data)
	a.ev.Add(MRestoreVolume, volume)
	return nil
}
