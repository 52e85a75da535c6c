package swarm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// R82 on a swarm: a project file becomes the Docker config
// gordon-<app>-<24 hex of its digest> (content-addressed: the same bytes
// are one config, new bytes a new one), referenced at the mount's target
// with the stored copy's mode; the copy is not bind-mounted, does not pin
// the instance and is not refused as a host path.
func TestR82_SwarmProjectFileIsAContentAddressedConfig(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	assert.Equal(t, "gordon-shop-"+digest[:24], configName("shop", digest+"-444"))
	assert.Equal(t, configName("shop", digest+"-444"), configName("shop", digest+"-555"), "one config per content")
	assert.NotEqual(t, configName("shop", digest+"-444"), configName("shop", strings.Repeat("cd", 32)+"-444"))
	long := configName(strings.Repeat("a", 63), digest+"-444")
	assert.Len(t, long, 64)
	assert.Regexp(t, swarmSecretNameRE, long)

	dir := t.TempDir()
	stored := filepath.Join(dir, digest+"-555")
	require.NoError(t, os.WriteFile(stored, []byte("#!/bin/sh"), 0o555))
	c := baseSpec()
	c.Mounts = []core.Mount{{Type: core.MountBind, Source: stored, Target: "/docker-entrypoint-initdb.d/01.sh", ReadOnly: true, Config: digest + "-555"}}
	assert.False(t, singleWriter(c), "a project file's copy is no host path")
	s, err := serviceSpec(c)
	require.NoError(t, err, "not refused as a bind mount")
	assert.Empty(t, s.TaskTemplate.ContainerSpec.Mounts, "not bind-mounted")

	files, err := configFiles(c)
	require.NoError(t, err)
	require.Equal(t, []configFile{{name: configName("shop", digest+"-555"), data: []byte("#!/bin/sh"),
		target: "/docker-entrypoint-initdb.d/01.sh", mode: 0o555}}, files)

	require.NoError(t, os.Remove(stored))
	_, err = configFiles(c)
	require.ErrorIs(t, err, core.ErrNotFound)
}
