package prune_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/engine/prune"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// fakeObjects is prune.Objects in memory: images by ID with tags and
// labels, networks and volumes; RemoveImage and RemoveNetwork record.
type fakeObjects struct {
	images   map[string]prune.Image
	inUse    map[string]bool
	networks []prune.Network
	volumes  []prune.Volume
	removed  []string
}

func (f *fakeObjects) ImagesInUse(context.Context) (map[string]bool, error) { return f.inUse, nil }

func (f *fakeObjects) BuiltImages(context.Context) ([]prune.Image, error) {
	var out []prune.Image
	for _, im := range f.images {
		if im.Labels[core.LabelManaged] == "true" && im.Labels[core.LabelRole] == prune.RoleBuild {
			out = append(out, im)
		}
	}
	slices.SortFunc(out, func(a, b prune.Image) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (f *fakeObjects) ImageID(_ context.Context, ref string) (string, error) {
	ref, _, _ = strings.Cut(ref, "@")
	for _, im := range f.images {
		if slices.Contains(im.Tags, ref) || im.ID == ref {
			return im.ID, nil
		}
	}
	return "", nil
}

func (f *fakeObjects) RemoveImage(_ context.Context, im prune.Image) error {
	delete(f.images, im.ID)
	f.removed = append(f.removed, "image "+im.ID)
	return nil
}

func (f *fakeObjects) Networks(_ context.Context, app string) ([]prune.Network, error) {
	var out []prune.Network
	for _, n := range f.networks {
		if n.Labels[core.LabelApp] == app {
			out = append(out, n)
		}
	}
	return out, nil
}

func (f *fakeObjects) RemoveNetwork(_ context.Context, name string) error {
	f.networks = slices.DeleteFunc(f.networks, func(n prune.Network) bool { return n.Name == name })
	f.removed = append(f.removed, "network "+name)
	return nil
}

func (f *fakeObjects) Volumes(_ context.Context, app string) ([]prune.Volume, error) {
	var out []prune.Volume
	for _, v := range f.volumes {
		if v.Labels[core.LabelApp] == app {
			out = append(out, v)
		}
	}
	return out, nil
}

func buildLabels(app, svc string) map[string]string {
	return map[string]string{core.LabelManaged: "true", core.LabelApp: app, core.LabelService: svc, core.LabelRole: prune.RoleBuild}
}

func builtImage(app, svc string, n int) prune.Image {
	return prune.Image{ID: fmt.Sprintf("sha256:%s-%s-%d", app, svc, n), Tags: []string{fmt.Sprintf("gordon/%s-%s:h%d", app, svc, n)},
		Labels: buildLabels(app, svc)}
}

// seedBuilt seeds app blog whose web service was built four times
// (rev-0 … rev-3, one image each) and serves rev-3.
func seedBuilt(t *testing.T) (*coretest.Harness, *fakeObjects) {
	h := coretest.NewEngine(t)
	objs := &fakeObjects{images: map[string]prune.Image{}, inUse: map[string]bool{}}
	for i := range 4 {
		im := builtImage("blog", "web", i)
		objs.images[im.ID] = im
	}
	spec := coretest.WebSpec(0)
	spec.Image = "gordon/blog-web:h3"
	if h.Runtime.Images == nil {
		h.Runtime.Images = map[string]core.ImageRef{}
	}
	h.Runtime.Images[spec.Image] = core.ImageRef{Ref: "sha256:blog-web-3", Digest: "sha256:blog-web-3", ID: "sha256:blog-web-3", Local: true}
	h.SeedServing("blog", coretest.BlogApp(spec), map[string]string{"web": "c-serving"}, map[string]map[int]int{"web": {8080: 17000}})
	ctx := context.Background()
	// The history: rev-1 … rev-4 built h0 … h3; DESIRED is rev-4 (the
	// seeded rev-0 names h3 too).
	for i := range 4 {
		s := coretest.WebSpec(0)
		s.Image = fmt.Sprintf("gordon/blog-web:h%d", i)
		require.NoError(t, h.Store.SaveRevision(ctx, core.Revision{ID: fmt.Sprintf("rev-%d", i+1), App: "blog",
			Spec: coretest.BlogApp(s), CreatedAt: coretest.T0.Add(time.Duration(i+1) * time.Minute)}))
	}
	require.NoError(t, h.Store.SaveDesired(ctx, "blog", "rev-4"))
	return h, objs
}

func names(items []prune.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Kind+" "+it.Name)
	}
	return out
}

func incarnation(t *testing.T, h *coretest.Harness, app string) string {
	info, err := h.Store.LoadApp(context.Background(), app)
	require.NoError(t, err)
	return info.Incarnation
}

func workload(app, svc, inc string) map[string]string {
	return map[string]string{core.LabelManaged: "true", core.LabelApp: app, core.LabelService: svc, core.LabelIncarnation: inc, core.LabelRole: "workload"}
}

// TestPruneKeepsServingAndRollbackImagesAndRemovesOlderBuilds: after
// three context changes, the serving image and the newest earlier one
// stay; the two older builds go; a dry run lists exactly those two and
// removes nothing.
func TestPruneKeepsServingAndRollbackImagesAndRemovesOlderBuilds(t *testing.T) {
	h, objs := seedBuilt(t)
	objs.images["sha256:other"] = prune.Image{ID: "sha256:other", Tags: []string{"gordon/shop-web:h0"}, Labels: buildLabels("shop", "web")}
	objs.images["sha256:plain"] = prune.Image{ID: "sha256:plain", Tags: []string{"gordon/blog-web:manual"}} // no gordon labels

	dry, err := h.Engine.PruneObjects(h.Ctx(), objs, h.Store, prune.Request{App: "blog", DryRun: true, KeepImages: -1})
	require.NoError(t, err)
	assert.True(t, dry.DryRun)
	assert.Equal(t, []string{"image gordon/blog-web:h0", "image gordon/blog-web:h1"}, names(dry.Removed))
	assert.Len(t, objs.images, 6, "a dry run removes nothing")
	assert.Empty(t, objs.removed)

	real, err := h.Engine.PruneObjects(h.Ctx(), objs, h.Store, prune.Request{App: "blog", KeepImages: -1})
	require.NoError(t, err)
	assert.Equal(t, names(dry.Removed), names(real.Removed), "the dry run listed exactly what the run removed")
	assert.Equal(t, []string{"image sha256:blog-web-0", "image sha256:blog-web-1"}, objs.removed)
	assert.Contains(t, objs.images, "sha256:blog-web-3", "serving")
	assert.Contains(t, objs.images, "sha256:blog-web-2", "rollback target")
	assert.Contains(t, objs.images, "sha256:other", "another app's image")
	assert.Contains(t, objs.images, "sha256:plain", "an image without gordon's labels")
	assert.ElementsMatch(t, []string{"image gordon/blog-web:h2", "image gordon/blog-web:h3"}, names(real.Kept))
}

// TestPruneKeepZeroAndInUse: --keep 0 keeps only the serving image and
// any image a container uses.
func TestPruneKeepZeroAndInUse(t *testing.T) {
	h, objs := seedBuilt(t)
	objs.inUse["sha256:blog-web-0"] = true
	rep, err := h.Engine.PruneObjects(h.Ctx(), objs, h.Store, prune.Request{App: "blog", KeepImages: 0})
	require.NoError(t, err)
	assert.Equal(t, []string{"image gordon/blog-web:h1", "image gordon/blog-web:h2"}, names(rep.Removed))
	assert.Contains(t, objs.images, "sha256:blog-web-0", "a container uses it")
}

// TestPruneNeverRemovesTheServingGenerationEvenStopped: a stopped
// container ACTIVE names stays (a stopped or sleeping app); an unowned
// exited container of the incarnation goes; one of another incarnation
// (another state directory) stays.
func TestPruneNeverRemovesTheServingGenerationEvenStopped(t *testing.T) {
	h, objs := seedBuilt(t)
	inc := incarnation(t, h, "blog")
	h.Runtime.AddContainer("c-serving", core.ContainerState{Status: core.StatusExited, Labels: workload("blog", "web", inc)}, nil)
	h.Runtime.AddContainer("c-old", core.ContainerState{Status: core.StatusExited, Labels: workload("blog", "web", inc)}, nil)
	h.Runtime.AddContainer("c-foreign", core.ContainerState{Status: core.StatusExited, Labels: workload("blog", "web", "other-incarnation")}, nil)
	h.Runtime.AddContainer("c-retiring", core.ContainerState{Status: core.StatusExited, Labels: workload("blog", "web", inc)}, nil)
	h.Runtime.AddContainer("c-draining", core.ContainerState{Status: core.StatusRunning, Labels: workload("blog", "web", inc)}, nil)
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-retiring", Reason: core.MarkerRetirementPending})
	h.SeedMarker(core.Marker{App: "blog", Service: "web", Container: "c-draining", Reason: core.MarkerRetirementPending})

	dry, err := h.Engine.PruneObjects(h.Ctx(), objs, h.Store, prune.Request{App: "blog", DryRun: true, KeepImages: -1})
	require.NoError(t, err)
	wantContainers := []string{"container c-old", "container c-retiring"}
	assert.Equal(t, wantContainers, names(dry.Removed)[:2])
	assert.True(t, h.Runtime.Exists("c-old"), "a dry run removes nothing")

	rep, err := h.Engine.PruneObjects(h.Ctx(), objs, h.Store, prune.Request{App: "blog", KeepImages: -1})
	require.NoError(t, err)
	assert.Equal(t, names(dry.Removed), names(rep.Removed))
	assert.True(t, h.Runtime.Exists("c-serving"), "the serving generation, stopped, stays")
	assert.True(t, h.Runtime.Exists("c-foreign"), "another incarnation's container stays")
	assert.True(t, h.Runtime.Exists("c-draining"), "a running superseded container is the periodic pass's")
	assert.False(t, h.Runtime.Exists("c-old"))
	assert.False(t, h.Runtime.Exists("c-retiring"))
	assert.Equal(t, []string{"c-draining"}, h.Store.MarkerContainers("blog"), "the retired container's marker is cleared")
}

// TestPruneSkipsAnAppWhoseOperationDidNotFinish: an unfinished op's
// leftovers wait for reconcile; the refusal changes nothing.
func TestPruneSkipsAnAppWhoseOperationDidNotFinish(t *testing.T) {
	h, objs := seedBuilt(t)
	inc := incarnation(t, h, "blog")
	h.Runtime.AddContainer("c-candidate", core.ContainerState{Status: core.StatusExited, Labels: workload("blog", "web", inc)}, nil)
	h.SeedOp(core.Operation{ID: "op-cut", Kind: core.OpDeploy, App: "blog"})
	rep, err := h.Engine.PruneObjects(h.Ctx(), objs, h.Store, prune.Request{App: "blog", KeepImages: -1})
	require.NoError(t, err)
	assert.Empty(t, rep.Removed)
	require.Len(t, rep.Skipped, 1)
	assert.Equal(t, "docker gordon reconcile blog", rep.Skipped[0].Hint)
	assert.True(t, h.Runtime.Exists("c-candidate"))
	assert.Len(t, objs.images, 4)
}

// TestPruneRemovedAppNetworksGoVolumesAreNamed: after remove, the app's
// network (of the ended incarnation, nothing attached) goes, a network
// with a container attached or of another incarnation stays, its built
// images go, and its volumes are kept with the command that deletes them.
func TestPruneRemovedAppNetworksGoVolumesAreNamed(t *testing.T) {
	h, objs := seedBuilt(t)
	inc := incarnation(t, h, "blog")
	_, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	netLabels := func(i string) map[string]string {
		return map[string]string{core.LabelManaged: "true", core.LabelApp: "blog", core.LabelIncarnation: i}
	}
	objs.networks = []prune.Network{{Name: "gordon-blog", Labels: netLabels(inc)},
		{Name: "gordon-blog-busy", Labels: netLabels(inc), Containers: 1},
		{Name: "gordon-blog-elsewhere", Labels: netLabels("another")}}
	objs.volumes = []prune.Volume{{Name: "gordon-blog-data", Labels: map[string]string{core.LabelManaged: "true", core.LabelApp: "blog", core.LabelService: "web", core.LabelIncarnation: inc}},
		{Name: "gordon-blog-foreign", Labels: map[string]string{core.LabelManaged: "true", core.LabelApp: "blog", core.LabelIncarnation: "another"}}}

	rep, err := h.Engine.PruneObjects(h.Ctx(), objs, h.Store, prune.Request{KeepImages: -1})
	require.NoError(t, err)
	assert.Equal(t, []string{"image gordon/blog-web:h0", "image gordon/blog-web:h1", "image gordon/blog-web:h2", "image gordon/blog-web:h3", "network gordon-blog"}, names(rep.Removed))
	assert.Equal(t, []string{"network gordon-blog-busy", "volume gordon-blog-data"}, names(rep.Kept))
	assert.Equal(t, "docker volume rm gordon-blog-data", rep.Kept[1].Hint)
	assert.Len(t, objs.networks, 2)
}

// TestPruneUnknownApp: an app this state directory never knew is an
// error that changes nothing.
func TestPruneUnknownApp(t *testing.T) {
	h, objs := seedBuilt(t)
	_, err := h.Engine.PruneObjects(h.Ctx(), objs, h.Store, prune.Request{App: "nosuch"})
	require.Error(t, err)
	assert.True(t, errors.Is(err, core.ErrNotFound))
	assert.Contains(t, err.Error(), `unknown app "nosuch"`)
	assert.Empty(t, objs.removed)
}

// TestPruneRemovesPartialSnapshotsAndKeepsCompleteOnes: a snapshot a
// crash cut off (no manifest) is removed, after a dry run that lists it
// and removes nothing; a complete snapshot is kept and named with the
// command that removes it.
func TestPruneRemovesPartialSnapshotsAndKeepsCompleteOnes(t *testing.T) {
	h, objs := seedBuilt(t)
	dir := t.TempDir()
	store := snapshot.Open(dir)
	h.Engine.Snapshots = store
	w, err := store.Begin(snapshot.Manifest{ID: "20261204-000000.000-web-0001", App: "blog", Service: "web", Trigger: snapshot.TriggerManual})
	require.NoError(t, err)
	_, err = w.AddVolume("gordon-blog-data", "/data", func(out io.Writer) error { _, err := out.Write([]byte("tar")); return err })
	require.NoError(t, err)
	_, err = w.Commit(w.Manifest())
	require.NoError(t, err)
	partial := filepath.Join(dir, "snapshots", "blog", "20261204-000001.000-web-0002")
	require.NoError(t, os.MkdirAll(partial, 0o700))

	dry, err := h.Engine.PruneObjects(h.Ctx(), objs, h.Store, prune.Request{App: "blog", DryRun: true, KeepImages: -1})
	require.NoError(t, err)
	assert.Contains(t, names(dry.Removed), "snapshot 20261204-000001.000-web-0002")
	assert.DirExists(t, partial, "a dry run removes nothing")

	real, err := h.Engine.PruneObjects(h.Ctx(), objs, h.Store, prune.Request{App: "blog", KeepImages: -1})
	require.NoError(t, err)
	assert.Contains(t, names(real.Removed), "snapshot 20261204-000001.000-web-0002")
	assert.NoDirExists(t, partial)
	assert.Contains(t, names(real.Kept), "snapshot 20261204-000000.000-web-0001")
	list, err := store.List("blog")
	require.NoError(t, err)
	assert.Len(t, list, 1)
}
