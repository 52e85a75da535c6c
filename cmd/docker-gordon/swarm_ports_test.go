package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/cli/cli/command"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// A deploy of a TCP bind the swarm edge does not publish is refused
// before anything changes: exit 1 naming the port and the command to run,
// no revision stored, nothing created in the state directory.
func TestDeploy_ATCPBindTheSwarmEdgeDoesNotPublishChangesNothing(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	state := t.TempDir()
	require.NoError(t, swarm.Save(state, swarm.Config{Registry: "reg:5000", HTTPPort: 80, TCPPorts: []int{9000}}))
	before, err := os.ReadDir(state)
	require.NoError(t, err)
	manifest := filepath.Join(t.TempDir(), "db.toml")
	require.NoError(t, os.WriteFile(manifest, []byte(`name = "db"

[services.db]
image = "reg:5000/db:1"

[[services.db.tcp]]
port = 5432
publish = "0.0.0.0:9001"
`), 0o600))
	var stderr bytes.Buffer
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))), command.WithOutputStream(io.Discard), command.WithErrorStream(&stderr))
	require.NoError(t, err)
	env := &cliEnv{dockerCli: dcli, logger: hclog.NewNullLogger()}
	env.opts.stateDir = state
	cmd := newDeployCommand(env)
	cmd.SetArgs([]string{"-f", manifest})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err = cmd.ExecuteContext(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the swarm edge does not publish port 9001")
	assert.Contains(t, err.Error(), "docker gordon system start --tcp-ports 9000,9001")
	assert.Contains(t, err.Error(), "nothing was changed")
	after, err := os.ReadDir(state)
	require.NoError(t, err)
	assert.Equal(t, len(before), len(after), "nothing was written to the state directory: %v", after)

	ok := swarm.Config{Network: "gordon-edge", TCPPorts: []int{9000, 9001}}
	env.plat = &system.Platform{Kind: system.Swarm, Config: ok}
	spec := core.AppSpec{Name: "db", Services: []core.ServiceSpec{{Name: "db", TCP: []core.L4Interface{{Port: 5432, Publish: "0.0.0.0:9001"}}}}}
	require.NoError(t, env.platform().CheckBinds(spec), "published now")
	one := &cliEnv{}
	one.opts.stateDir = t.TempDir()
	require.NoError(t, one.platform().CheckBinds(spec), "one engine: the edge listens on any port")
}
