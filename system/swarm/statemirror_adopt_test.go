package swarm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Breaker (b1): a state config is written by anyone who can reach a
// manager's API; its app name comes from its label and its bundle. An app
// name that is not a valid app name (path traversal) must be refused by
// adoption with nothing written outside stateDir/apps/<app>/.
func TestR80_AdoptRefusesAStateConfigWhoseAppNameLeavesTheAppsDirectory(t *testing.T) {
	root := t.TempDir()
	stateDir := filepath.Join(root, "state")
	require.NoError(t, os.MkdirAll(stateDir, 0o700))
	app := "../../escaped"
	data, err := encodeBundle(Bundle{Schema: bundleSchema, App: app, Node: "n1", At: time.Now(),
		Files: map[string][]byte{"app.json": []byte(`{"app":"x"}`)}}, nil)
	require.NoError(t, err)
	f := &fakeConfigs{configs: map[string]swarm.Config{"cfg1": {ID: "cfg1", Spec: swarm.ConfigSpec{
		Annotations: swarm.Annotations{Name: "gordon-state-evil", Labels: map[string]string{LabelState: app, LabelStateNode: "n1"}},
		Data:        data}}}}
	all, err := ListAdoptable(context.Background(), f)
	require.NoError(t, err)
	for _, a := range all {
		err = Adopt(context.Background(), f, stateDir, a)
		assert.ErrorIs(t, err, core.ErrInvalid, "an app name with path elements is refused")
	}
	_, err = os.Stat(filepath.Join(root, "escaped", "app.json"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing is written outside the state directory")
}

// Breaker (b1): right after an adoption the adopting state directory
// holds byte-identical records, so its bundle's hash equals the old
// owner's config's hash; the config name (gordon-state-<hash>-<app>) is
// taken. The adopting mirror must still end up with a config of its own
// owner for the app (and its pass must not fail every time).
func TestR80_TheAdoptingMirrorWritesItsOwnConfigForRecordsIdenticalToTheOldOwners(t *testing.T) {
	ctx := context.Background()
	f := &fakeConfigs{configs: map[string]swarm.Config{}}
	src, dst := t.TempDir(), t.TempDir()
	appState(t, src, "web", "r1")
	a := &Mirror{API: f, StateDir: src, Node: "node-a", Owner: "owner-a"}
	require.NoError(t, a.Sync(ctx))
	list, err := ListAdoptable(ctx, f)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NoError(t, Adopt(ctx, f, dst, list[0]))

	b := &Mirror{API: f, StateDir: dst, Node: "node-b", Owner: "owner-b"}
	for i := 0; i < 3; i++ {
		assert.NoError(t, b.Sync(ctx), "pass %d of the adopting mirror", i)
	}
	owners := map[string]bool{}
	for _, c := range stateConfigsOf(f, "web") {
		owners[c.Spec.Labels[LabelStateOwner]] = true
	}
	assert.Equal(t, map[string]bool{"owner-b": true}, owners, "web's state config is the adopting owner's")
}
