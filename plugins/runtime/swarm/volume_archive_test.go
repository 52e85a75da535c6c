package swarm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/api/types/system"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/volxfer"
)

// fakeManager is the part of a swarm manager's API the volume archive
// uses. A created helper service runs volxfer.Run on dir in a goroutine
// (helper: true), or gets the task state reject (helper: false).
type fakeManager struct {
	t        *testing.T
	dir      string
	helper   bool
	reject   string
	onEdge   bool
	mu       sync.Mutex
	services map[string]swarm.Service
	tasks    map[string]swarm.Task
	created  []swarm.ServiceSpec
	removed  []string
}

func newFake(t *testing.T, dir string) *fakeManager {
	f := &fakeManager{t: t, dir: dir, helper: true, onEdge: true, services: map[string]swarm.Service{}, tasks: map[string]swarm.Task{}}
	f.services["edge"] = swarm.Service{ID: "edge", Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "gordon-edge"},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "reg:5000/gordon-edge@sha256:abc"}}}}
	return f
}

// instance adds a gordon instance service mounting volume at /data,
// pinned to node, with replicas, created at the given time.
func (f *fakeManager) instance(id, volume, node string, replicas uint64, at time.Time) {
	f.services[id] = swarm.Service{ID: id, Meta: swarm.Meta{CreatedAt: at}, Spec: swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: "gordon-shop-db-" + id, Labels: map[string]string{core.LabelManaged: "true", LabelNode: node}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "reg/kv@sha256:1",
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: volume, Target: "/data",
				VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{core.LabelApp: "shop"}}}}},
			Placement: &swarm.Placement{Constraints: []string{"node.id==" + node}}},
		Mode: swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
	}}
}

func (f *fakeManager) runtime() *Runtime {
	srv := httptest.NewServer(f)
	f.t.Cleanup(srv.Close)
	r, err := NewWithOptions("tcp://"+strings.TrimPrefix(srv.URL, "http://"), false, Options{EdgeNetwork: "gordon-edge", EdgeService: "gordon-edge", StartTimeout: 5 * time.Second})
	require.NoError(f.t, err)
	return r
}

func (f *fakeManager) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Api-Version", "1.47")
	p := req.URL.Path
	if i := strings.Index(p[1:], "/"); strings.HasPrefix(p, "/v1.") && i > 0 {
		p = p[i+1:]
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	reply := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch {
	case parts[0] == "_ping":
		_, _ = w.Write([]byte("OK"))
	case parts[0] == "info":
		reply(system.Info{Swarm: swarm.Info{ControlAvailable: true, LocalNodeState: swarm.LocalNodeStateActive}})
	case parts[0] == "containers" && f.onEdge:
		reply(container.InspectResponse{ID: "self", NetworkSettings: &container.NetworkSettings{Networks: map[string]*network.EndpointSettings{
			"gordon-edge": {NetworkID: "netedge", IPAddress: netip.MustParseAddr("127.0.0.1")}}}})
	case parts[0] == "nodes" && len(parts) == 2:
		reply(swarm.Node{ID: parts[1], Description: swarm.NodeDescription{Hostname: "host-" + parts[1]},
			Status: swarm.NodeStatus{State: swarm.NodeStateReady}, Spec: swarm.NodeSpec{Availability: swarm.NodeAvailabilityActive}})
	case parts[0] == "nodes":
		reply([]swarm.Node{{ID: "n2", Description: swarm.NodeDescription{Hostname: "host-n2"}}})
	case parts[0] == "services" && len(parts) == 2 && parts[1] == "create":
		f.create(w, req)
	case parts[0] == "services" && len(parts) == 3 && parts[2] == "logs":
	case parts[0] == "services" && len(parts) == 2 && req.Method == http.MethodDelete:
		f.removed = append(f.removed, parts[1])
		delete(f.services, parts[1])
	case parts[0] == "services" && len(parts) == 2:
		s, ok := f.services[parts[1]]
		if !ok && parts[1] == "gordon-edge" {
			s, ok = f.services["edge"]
		}
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			reply(map[string]string{"message": "service " + parts[1] + " not found"})
			return
		}
		reply(s)
	case parts[0] == "services":
		var out []swarm.Service
		for _, s := range f.services {
			out = append(out, s)
		}
		reply(out)
	case parts[0] == "tasks":
		var flt map[string]map[string]bool
		_ = json.Unmarshal([]byte(req.URL.Query().Get("filters")), &flt)
		out := []swarm.Task{}
		for svc := range flt["service"] {
			if t, ok := f.tasks[svc]; ok {
				out = append(out, t)
			}
		}
		reply(out)
	default:
		w.WriteHeader(http.StatusNotFound)
		reply(map[string]string{"message": "no such thing: " + p})
	}
}

// create records a helper service and runs or rejects its task.
func (f *fakeManager) create(w http.ResponseWriter, req *http.Request) {
	var spec swarm.ServiceSpec
	require.NoError(f.t, json.NewDecoder(req.Body).Decode(&spec))
	f.created = append(f.created, spec)
	id := "helper" + string(rune('0'+len(f.created)))
	f.services[id] = swarm.Service{ID: id, Spec: spec}
	task := swarm.Task{ID: "t-" + id, ServiceID: id, NodeID: "n2", DesiredState: swarm.TaskStateRunning, Status: swarm.TaskStatus{State: swarm.TaskStateRunning}}
	if !f.helper {
		task.Status = swarm.TaskStatus{State: swarm.TaskStateRejected, Err: f.reject}
	}
	f.tasks[id] = task
	_ = json.NewEncoder(w).Encode(swarm.ServiceCreateResponse{ID: id})
	if !f.helper {
		return
	}
	env := map[string]string{}
	for _, kv := range spec.TaskTemplate.ContainerSpec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	mode := volxfer.ModeExport
	if env[volxfer.EnvMode] == "restore" {
		mode = volxfer.ModeRestore
	}
	c := volxfer.Config{Peer: env[volxfer.EnvPeer], Pin: env[volxfer.EnvPin], Token: env[volxfer.EnvToken], Mode: mode, Dir: f.dir}
	go func() {
		err := volxfer.Run(context.Background(), c)
		f.mu.Lock()
		defer f.mu.Unlock()
		t := f.tasks[id]
		t.Status.State = swarm.TaskStateComplete
		if err != nil {
			t.Status = swarm.TaskStatus{State: swarm.TaskStateFailed, Err: "task: non-zero exit (1)", ContainerStatus: &swarm.ContainerStatus{ExitCode: 1}}
		}
		f.tasks[id] = t
	}()
}

func volumeTree(t *testing.T) string {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "db", "wal"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "db", "data"), []byte("v1 data"), 0o640))
	require.NoError(t, os.Symlink("db/data", filepath.Join(dir, "current")))
	return dir
}

// An export runs the helper service on the instance's node (the edge's
// image, the volume read-only, the control network only, never
// restarted, managed and role volume-helper labels, json-file logs), gets
// the volume's tar over the transfer, and removes the helper.
func TestSwarm_ExportVolumeRunsTheHelperOnTheVolumesNode(t *testing.T) {
	dir := volumeTree(t)
	f := newFake(t, dir)
	f.instance("inst1", "shop_data", "n2", 0, time.Now())
	r := f.runtime()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got, want bytes.Buffer
	require.NoError(t, r.ExportVolume(ctx, "inst1", "/data", &got))
	require.NoError(t, volxfer.WriteTar(dir, &want))
	assert.Equal(t, want.Bytes(), got.Bytes())

	require.Len(t, f.created, 1)
	s := f.created[0]
	assert.Equal(t, map[string]string{core.LabelManaged: "true", core.LabelRole: "volume-helper"}, s.Labels)
	cs := s.TaskTemplate.ContainerSpec
	assert.Equal(t, "reg:5000/gordon-edge@sha256:abc", cs.Image)
	assert.Equal(t, []string{"/gordon-edge", "volume-helper"}, cs.Command)
	require.Len(t, cs.Mounts, 1)
	assert.Equal(t, mount.Mount{Type: mount.TypeVolume, Source: "shop_data", Target: volxfer.MountPath, ReadOnly: true,
		VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{core.LabelApp: "shop"}}}, cs.Mounts[0])
	assert.Equal(t, []string{"node.id==n2"}, s.TaskTemplate.Placement.Constraints)
	assert.Equal(t, []swarm.NetworkAttachmentConfig{{Target: "netedge"}}, s.TaskTemplate.Networks, "the control network (this container's endpoint's ID)")
	assert.Equal(t, swarm.RestartPolicyConditionNone, s.TaskTemplate.RestartPolicy.Condition)
	assert.Equal(t, "json-file", s.TaskTemplate.LogDriver.Name)
	assert.Equal(t, []string{"helper1"}, f.removed)
}

// A restore finds the volume's node from the newest gordon service that
// mounts it, mounts it read-write and leaves exactly the snapshot in it.
func TestSwarm_RestoreVolumeUsesTheNewestMountersNode(t *testing.T) {
	src := volumeTree(t)
	var tarball bytes.Buffer
	require.NoError(t, volxfer.WriteTar(src, &tarball))
	dst := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dst, "newer"), []byte("v2 data"), 0o644))
	f := newFake(t, dst)
	f.instance("old", "shop_data", "n1", 0, time.Now().Add(-time.Hour))
	f.instance("new", "shop_data", "n3", 0, time.Now())
	f.instance("other", "shop_cache", "n1", 0, time.Now().Add(time.Hour))
	r := f.runtime()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.RestoreVolume(ctx, "shop_data", &tarball))
	require.Len(t, f.created, 1)
	assert.Equal(t, []string{"node.id==n3"}, f.created[0].TaskTemplate.Placement.Constraints)
	assert.False(t, f.created[0].TaskTemplate.ContainerSpec.Mounts[0].ReadOnly)
	var back, want bytes.Buffer
	require.NoError(t, volxfer.WriteTar(dst, &back))
	require.NoError(t, volxfer.WriteTar(src, &want))
	assert.Equal(t, want.Bytes(), back.Bytes())

	err := r.RestoreVolume(ctx, "nobody_mounts_it", bytes.NewReader(nil))
	assert.ErrorIs(t, err, core.ErrNotFound)
}

// A running instance is refused (its volume is not quiet), a path
// without a volume is not found; neither starts a helper.
func TestSwarm_ExportVolumeRefusesARunningInstance(t *testing.T) {
	f := newFake(t, t.TempDir())
	f.instance("inst1", "shop_data", "n2", 1, time.Now())
	r := f.runtime()
	ctx := context.Background()
	err := r.ExportVolume(ctx, "inst1", "/data", &bytes.Buffer{})
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "stop it first")
	err = r.ExportVolume(ctx, "inst1", "/elsewhere", &bytes.Buffer{})
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.Empty(t, f.created)
}

// Outside a container on the control network (the CLI on a host, a test
// without a lab) the archive is unsupported, so auto snapshots warn.
func TestSwarm_VolumeArchiveOffTheControlNetworkIsUnsupported(t *testing.T) {
	f := newFake(t, t.TempDir())
	f.onEdge = false
	f.instance("inst1", "shop_data", "n2", 0, time.Now())
	r := f.runtime()
	err := r.ExportVolume(context.Background(), "inst1", "/data", &bytes.Buffer{})
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Contains(t, err.Error(), "runner")
	assert.Empty(t, f.created)
}

// A helper task Swarm rejects ends the transfer with Swarm's reason (in
// the user's words, ErrUnavailable), and the helper is removed.
func TestSwarm_ARejectedHelperSaysWhyAndIsRemoved(t *testing.T) {
	f := newFake(t, t.TempDir())
	f.helper, f.reject = false, "no suitable node (1 node not available for new tasks)"
	f.instance("inst1", "shop_data", "n2", 0, time.Now())
	r := f.runtime()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := r.ExportVolume(ctx, "inst1", "/data", &bytes.Buffer{})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "no suitable node")
	assert.Contains(t, err.Error(), "volume helper on node host-n2")
	assert.Equal(t, []string{"helper1"}, f.removed)
}

// The node a volume lives on: the LabelNode label, else the node.id
// constraint.
func TestSwarm_PinnedNode(t *testing.T) {
	s := swarm.Service{Spec: swarm.ServiceSpec{TaskTemplate: swarm.TaskSpec{Placement: &swarm.Placement{Constraints: []string{"node.role==worker", "node.id == abc"}}}}}
	assert.Equal(t, "abc", pinnedNode(s))
	s.Spec.Labels = map[string]string{LabelNode: "lbl"}
	assert.Equal(t, "lbl", pinnedNode(s))
	assert.Equal(t, "", pinnedNode(swarm.Service{}))
}

// A helper that fails because the edge's image has no volume-helper (an
// edge not updated since this runtime) says to update the edge.
func TestSwarm_AnOldEdgeImageSaysToUpdateTheEdge(t *testing.T) {
	old := `: it said: gordon-edge: unknown command "volume-helper" for "gordon-edge"`
	assert.Contains(t, hinted(old), "docker gordon system start")
	assert.Equal(t, ": it said: disk full", hinted(": it said: disk full"))
}
