package swarm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// fakeConfigs is a swarm's config store (the calls the mirror makes).
type fakeConfigs struct {
	client.APIClient
	configs map[string]swarm.Config
	seq     int
	calls   int
}

func (f *fakeConfigs) ConfigList(_ context.Context, o client.ConfigListOptions) (client.ConfigListResult, error) {
	f.calls++
	var out []swarm.Config
	for _, c := range f.configs {
		if _, ok := c.Spec.Labels[LabelState]; ok {
			out = append(out, c)
		}
	}
	return client.ConfigListResult{Items: out}, nil
}

func (f *fakeConfigs) ConfigCreate(_ context.Context, o client.ConfigCreateOptions) (client.ConfigCreateResult, error) {
	f.calls++
	for _, c := range f.configs {
		if c.Spec.Name == o.Spec.Name {
			return client.ConfigCreateResult{}, fmt.Errorf("config %s already exists: %w", o.Spec.Name, core.ErrConflict)
		}
	}
	f.seq++
	id := fmt.Sprintf("cfg%d", f.seq)
	f.configs[id] = swarm.Config{ID: id, Spec: o.Spec}
	return client.ConfigCreateResult{ID: id}, nil
}

func (f *fakeConfigs) ConfigRemove(_ context.Context, id string, _ client.ConfigRemoveOptions) (client.ConfigRemoveResult, error) {
	f.calls++
	delete(f.configs, id)
	return client.ConfigRemoveResult{}, nil
}

func (f *fakeConfigs) ConfigInspect(_ context.Context, id string, _ client.ConfigInspectOptions) (client.ConfigInspectResult, error) {
	c, ok := f.configs[id]
	if !ok {
		return client.ConfigInspectResult{}, fmt.Errorf("no config %s: %w", id, core.ErrNotFound)
	}
	return client.ConfigInspectResult{Config: c}, nil
}

func writeRecord(t *testing.T, dir, app, name, body string) {
	t.Helper()
	p := filepath.Join(dir, "apps", app, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
}

func appState(t *testing.T, dir, app, rev string) {
	writeRecord(t, dir, app, "app.json", `{"app":"`+app+`","incarnation":"inc-1"}`)
	writeRecord(t, dir, app, "desired.json", `{"revision":"`+rev+`"}`)
	writeRecord(t, dir, app, "active.json", `{"app":"`+app+`","services":{"web":{"effective_revision":"`+rev+`","container":"svc-`+rev+`"}}}`)
	writeRecord(t, dir, app, "revisions/"+rev+".json", `{"id":"`+rev+`"}`)
	writeRecord(t, dir, app, "ops/op-"+rev+".json", `{"id":"op-`+rev+`"}`)
}

func stateConfigsOf(f *fakeConfigs, app string) []swarm.Config {
	var out []swarm.Config
	for _, c := range f.configs {
		if c.Spec.Labels[LabelState] == app {
			out = append(out, c)
		}
	}
	return out
}

// R80: the mirror keeps exactly one state config per app, replaced when
// the app's records change, untouched (no API call) when they do not,
// and removed when the app is removed here; apps this state directory
// never had keep theirs.
func TestR80_TheMirrorKeepsOneStateConfigPerApp(t *testing.T) {
	dir := t.TempDir()
	f := &fakeConfigs{configs: map[string]swarm.Config{}}
	f.configs["other"] = swarm.Config{ID: "other", Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "gordon-state-x-blog", Labels: map[string]string{LabelState: "blog"}}}}
	appState(t, dir, "web", "r1")
	m := &Mirror{API: f, StateDir: dir, Node: "node-a"}
	ctx := context.Background()

	require.NoError(t, m.Sync(ctx))
	cs := stateConfigsOf(f, "web")
	require.Len(t, cs, 1)
	assert.Equal(t, "node-a", cs[0].Spec.Labels[LabelStateNode])
	first := cs[0].ID

	calls := f.calls
	require.NoError(t, m.Sync(ctx))
	assert.Equal(t, calls, f.calls, "an unchanged app makes no API call")

	writeRecord(t, dir, "web", "revisions/r2.json", `{"id":"r2"}`)
	writeRecord(t, dir, "web", "desired.json", `{"revision":"r2"}`)
	require.NoError(t, m.Sync(ctx))
	cs = stateConfigsOf(f, "web")
	require.Len(t, cs, 1, "the old config is removed once the new one exists")
	assert.NotEqual(t, first, cs[0].ID)

	require.NoError(t, os.Remove(filepath.Join(dir, "apps", "web", "app.json")))
	require.NoError(t, m.Sync(ctx))
	assert.Empty(t, stateConfigsOf(f, "web"), "a removed app's config goes")
	assert.Len(t, stateConfigsOf(f, "blog"), 1, "another state directory's app is left alone")
}

// R80: adoption writes the records a state config holds (DESIRED,
// ACTIVE, the revisions they name; not ops or secrets) into another state
// directory; an app that directory holds is refused and nothing is
// written.
func TestR80_AdoptWritesTheMirroredRecordsIntoAnotherStateDirectory(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	f := &fakeConfigs{configs: map[string]swarm.Config{}}
	appState(t, src, "web", "r1")
	writeRecord(t, src, "web", "revisions/r0.json", `{"id":"r0"}`)
	now := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	m := &Mirror{API: f, StateDir: src, Node: "node-a", Now: func() time.Time { return now }}
	ctx := context.Background()
	require.NoError(t, m.Sync(ctx))

	list, err := ListAdoptable(ctx, f)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "web", list[0].App)
	assert.Equal(t, "node-a", list[0].Node)
	assert.True(t, now.Equal(list[0].At))

	require.NoError(t, Adopt(ctx, f, dst, list[0]))
	for _, name := range []string{"app.json", "desired.json", "active.json", "revisions/r1.json"} {
		want, err := os.ReadFile(filepath.Join(src, "apps", "web", name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dst, "apps", "web", name))
		require.NoError(t, err, name)
		assert.Equal(t, string(want), string(got), name)
	}
	for _, name := range []string{"revisions/r0.json", "ops/op-r1.json"} {
		_, err := os.Stat(filepath.Join(dst, "apps", "web", name))
		assert.ErrorIs(t, err, os.ErrNotExist, "%s is not carried: no record names it", name)
	}

	err = Adopt(ctx, f, dst, list[0])
	assert.ErrorIs(t, err, core.ErrConflict, "an app already held is not overwritten")
}

// A state config naming a file outside the app's records (a path out of
// its directory) is refused and writes nothing.
func TestR80_AStateConfigWithAForeignFileIsRefused(t *testing.T) {
	dst := t.TempDir()
	f := &fakeConfigs{configs: map[string]swarm.Config{}}
	data, err := encodeBundle(Bundle{Schema: bundleSchema, App: "web", Files: map[string][]byte{
		"app.json": []byte(`{}`), "../../../etc/evil.json": []byte("x")}}, nil)
	require.NoError(t, err)
	f.configs["c1"] = swarm.Config{ID: "c1", Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "gordon-state-x-web",
		Labels: map[string]string{LabelState: "web", LabelStateAt: time.Now().UTC().Format(time.RFC3339Nano)}}, Data: data}}
	list, err := ListAdoptable(context.Background(), f)
	require.NoError(t, err)
	require.Len(t, list, 1)
	err = Adopt(context.Background(), f, dst, list[0])
	assert.ErrorIs(t, err, core.ErrInvalid)
	_, err = os.Stat(filepath.Join(dst, "apps"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing written")
}

// R80: an app whose lock is held (an operation writes its records in
// several steps) is not mirrored until it is free, so a state config never
// holds half an operation.
func TestR80_ABusyAppIsMirroredOnlyOnceItsOperationEnds(t *testing.T) {
	dir := t.TempDir()
	f := &fakeConfigs{configs: map[string]swarm.Config{}}
	appState(t, dir, "web", "r1")
	busy := true
	m := &Mirror{API: f, StateDir: dir, Node: "n", TryLock: func(context.Context, string) (func(), bool, error) {
		return func() {}, !busy, nil
	}}
	require.NoError(t, m.Sync(context.Background()))
	assert.Empty(t, stateConfigsOf(f, "web"), "nothing is read while the app is busy")
	busy = false
	require.NoError(t, m.Sync(context.Background()))
	assert.Len(t, stateConfigsOf(f, "web"), 1)
}
