package swarmsys

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
func TestBreak_AdoptRefusesAStateConfigWhoseAppNameLeavesTheAppsDirectory(t *testing.T) {
	root := t.TempDir()
	stateDir := filepath.Join(root, "state")
	require.NoError(t, os.MkdirAll(stateDir, 0o700))
	app := "../../escaped"
	data, err := encodeBundle(Bundle{Schema: bundleSchema, App: app, Node: "n1", At: time.Now(),
		Files: map[string][]byte{"app.json": []byte(`{"app":"x"}`)}})
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
