package swarm

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// The edge service: one task per node (global), dnsrr (no VIP), HTTP
// published in host mode only, the admin port on the overlay only, the
// peers' name, the control credentials as a Docker secret file (no token
// in the environment: docker inspect on a node shows none), state on
// tmpfs, restarted on any exit; labelled nodes only with Labelled; a
// changed spec changes the config label, the same spec keeps it.
func TestEdgeSpec_GlobalHostModeDNSRRWithTheControlSecretAndPeers(t *testing.T) {
	e := EdgeService{Config: Config{Network: "gordon-edge", Service: "gordon-edge", AdminPort: 9180, HTTPPort: 80, Image: "reg:5000/gordon-edge@sha256:abc"},
		ControlSecretID: "sid", ControlSecretName: "gordon-edge-control-x"}
	s := edgeSpec(e)
	require.NotNil(t, s.Mode.Global, "one task per node")
	assert.Equal(t, swarm.ResolutionModeDNSRR, s.EndpointSpec.Mode)
	require.Len(t, s.EndpointSpec.Ports, 1)
	p := s.EndpointSpec.Ports[0]
	assert.Equal(t, swarm.PortConfigPublishModeHost, p.PublishMode)
	assert.Equal(t, uint32(80), p.PublishedPort)
	assert.Equal(t, uint32(80), p.TargetPort)
	cs := s.TaskTemplate.ContainerSpec
	assert.Equal(t, "reg:5000/gordon-edge@sha256:abc", cs.Image)
	assert.Equal(t, []string{"run", "--state-dir", "/state", "--http-addr", ":80", "--admin-addr", "0.0.0.0:9180", "--peers", "tasks.gordon-edge",
		"--control-file", "/run/secrets/gordon-control", "--dial-timeout", "1s"}, cs.Args)
	assert.Equal(t, []string{"TMPDIR=/tmp"}, cs.Env, "no token in the environment")
	require.Len(t, cs.Secrets, 1)
	assert.Equal(t, "gordon-edge-control-x", cs.Secrets[0].SecretName)
	assert.Equal(t, "gordon-control", cs.Secrets[0].File.Name)
	assert.Equal(t, os.FileMode(0o400), cs.Secrets[0].File.Mode)
	assert.Equal(t, 35*time.Second, *cs.StopGracePeriod, "the default drain plus a margin")
	assert.Equal(t, swarm.RestartPolicyConditionAny, s.TaskTemplate.RestartPolicy.Condition)
	assert.Equal(t, []swarm.NetworkAttachmentConfig{{Target: "gordon-edge"}}, s.TaskTemplate.Networks)
	assert.Empty(t, s.TaskTemplate.Placement.Constraints)
	assert.Nil(t, s.UpdateConfig)

	l := e
	l.Labelled = true
	assert.Equal(t, []string{"node.labels.dev.gordon.edge==true"}, edgeSpec(l).TaskTemplate.Placement.Constraints)
	assert.Equal(t, s.Labels[labelConfig], edgeSpec(e).Labels[labelConfig], "same spec, same config label")
	assert.NotEqual(t, s.Labels[labelConfig], edgeSpec(l).Labels[labelConfig], "a changed spec is an update")
	d := e
	d.Drain = 10 * time.Second
	assert.Contains(t, edgeSpec(d).TaskTemplate.ContainerSpec.Args, "--shutdown-timeout")
}

// swarm.json round-trips with its defaults; a missing file is "one
// engine"; a broken one is core.ErrInvalid; the token is created once
// (0600) and then kept.
func TestConfig_SaveLoadAndTheToken(t *testing.T) {
	dir := t.TempDir()
	_, ok, err := Load(dir)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.False(t, Present(dir))
	require.NoError(t, Save(dir, Config{Registry: "reg:5000", HTTPPort: 80}))
	c, ok, err := Load(dir)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, Config{Schema: 1, Network: DefaultNetwork, Service: DefaultService, AdminPort: DefaultAdminPort, Registry: "reg:5000", HTTPPort: 80}, c)
	assert.True(t, Present(dir))

	t1, err := EnsureToken(dir)
	require.NoError(t, err)
	assert.Len(t, t1, 64)
	t2, err := EnsureToken(dir)
	require.NoError(t, err)
	assert.Equal(t, t1, t2, "the token is kept")
	fi, err := os.Stat(filepath.Join(dir, TokenFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFile), []byte("{"), 0o644))
	_, _, err = Load(dir)
	assert.ErrorIs(t, err, core.ErrInvalid)
}
