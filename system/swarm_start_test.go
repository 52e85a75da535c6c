package system

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	mswarm "github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/fakedocker"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// swarmEnv is an Env over a fresh state directory and the fake engine;
// the edge binary is any existing file (the start stops before it is
// built into an image).
func swarmEnv(t *testing.T, api *fakedocker.Engine) (Env, *bytes.Buffer) {
	t.Helper()
	env, _ := recordsEnv(t)
	var out bytes.Buffer
	env.API, env.Out, env.Err = api, &out, &out
	env.EdgeBinary = func() (string, error) { return os.Executable() }
	return env, &out
}

func readyNode(id, name string) mswarm.Node {
	n := mswarm.Node{ID: id}
	n.Description.Hostname = name
	n.Status.State = mswarm.NodeStateReady
	return n
}

// startOpts are system start's settings on manager n2 with a registry.
func startOpts() SwarmStartOptions {
	return SwarmStartOptions{NodeID: "n2", Registry: "reg:5000", EdgeNodes: "all", HTTPAddr: ":80", Drain: 30 * time.Second}
}

// R80: system start on a manager whose state directory does not hold an
// app the swarm's state configs hold is refused, without --adopt, while
// the manager that wrote them is a ready node; nothing changes (no engine
// call that changes anything, no file in the state directory).
func TestR80_SwarmStartRefusesAdoptionWhileTheOwnerIsAReadyNode(t *testing.T) {
	api := &fakedocker.Engine{
		Nodes: []mswarm.Node{readyNode("n1", "mgr-a"), readyNode("n2", "mgr-b")},
		Configs: map[string]mswarm.Config{"c1": {ID: "c1", Spec: mswarm.ConfigSpec{Annotations: mswarm.Annotations{Name: "gordon-state-shop",
			Labels: map[string]string{swarm.LabelState: "shop", swarm.LabelStateNode: "n1", swarm.LabelStateAt: time.Now().Format(time.RFC3339Nano)}}}}},
	}
	env, _ := swarmEnv(t, api)
	before, err := os.ReadDir(env.StateDir)
	require.NoError(t, err)

	res, err := StartSwarm(context.Background(), env, startOpts())
	require.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "shop (manager mgr-a)")
	assert.Contains(t, err.Error(), "system start --adopt")
	assert.Contains(t, err.Error(), "nothing was changed")
	assert.False(t, res.Ran)
	assert.Empty(t, api.Changes(), "no engine call changed anything: %v", api.Calls())
	after, err := os.ReadDir(env.StateDir)
	require.NoError(t, err)
	assert.Equal(t, len(before), len(after), "nothing was written to the state directory")
	assert.NoFileExists(t, filepath.Join(env.StateDir, swarm.ConfigFile))
}

// A --tcp-ports list that drops a port a serving app's TCP bind publishes
// is refused before the swarm is touched: the bind would stop answering
// from outside. swarm.json keeps the last start's ports.
func TestSwarmStart_StrandedPortIsRefusedAndNothingChanges(t *testing.T) {
	api := &fakedocker.Engine{Nodes: []mswarm.Node{readyNode("n2", "mgr-b")}}
	env, store := recordsEnv(t)
	env.API, env.Out, env.Err = api, &bytes.Buffer{}, &bytes.Buffer{}
	env.EdgeBinary = func() (string, error) { return os.Executable() }
	last := swarm.Config{Network: "gordon-edge", Service: "gordon-edge", Registry: "reg:5000", HTTPPort: 80, AdminPort: 9180, TCPPorts: []int{9000}, StateID: "s1", ManagerNode: "n2"}
	require.NoError(t, swarm.Save(env.StateDir, last))
	ctx := context.Background()
	_, err := store.EnsureApp(ctx, "db")
	require.NoError(t, err)
	require.NoError(t, store.SaveActive(ctx, core.Active{App: "db", Services: map[string]*core.ActiveService{
		"pg": {Container: "svc1", Spec: core.ServiceSpec{Name: "pg", TCP: []core.L4Interface{{Port: 5432, Publish: "0.0.0.0:9000"}}}}}}))

	o := startOpts()
	o.Registry, o.TCPPorts = "", "9001"
	o.Changed = func(flag string) bool { return flag == "tcp-ports" }
	_, err = StartSwarm(ctx, env, o)
	require.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "app db service pg binds TCP :9000")
	assert.Contains(t, err.Error(), "nothing was changed")
	assert.Empty(t, api.Changes(), "no engine call changed anything: %v", api.Calls())
	kept, ok, err := swarm.Load(env.StateDir)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []int{9000}, kept.TCPPorts, "swarm.json keeps the last start's ports")
}

// The swarm start checks everything before it changes anything: with no
// edge running, no app to adopt and free names, its first change is the
// edge overlay; when that fails, the start stops there (swarm.json is not
// written, nothing is remembered).
func TestSwarmStart_ChecksComeFirstThenTheEdgeOverlay(t *testing.T) {
	api := &fakedocker.Engine{Nodes: []mswarm.Node{readyNode("n2", "mgr-b")}, FailNetworkCreate: errors.New("overlay refused")}
	env, _ := swarmEnv(t, api)

	res, err := StartSwarm(context.Background(), env, startOpts())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "overlay refused")
	assert.False(t, res.Ran, "nothing to remember")
	assert.Equal(t, []string{"NetworkCreate"}, api.Changes(), "calls: %v", api.Calls())
	assert.Contains(t, api.Calls(), "ServiceInspect", "the running edge was looked for")
	assert.Contains(t, api.Calls(), "ContainerInspect", "the reconcile container's name was checked")
	assert.NoFileExists(t, filepath.Join(env.StateDir, swarm.ConfigFile))
}
