package compose

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// TestCompose_BuildMapsShortAndLongForm (image builds): build: PATH and the
// long form (context, dockerfile, args, target, labels) become the
// manifest's [services.X.build]; the context is written relative to the
// project directory and is absolute in the spec; an argument without a
// value takes the project environment's; cache keys are noted, not mapped.
func TestCompose_BuildMapsShortAndLongForm(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    build: ./web
  api:
    image: shop/api:2
    build:
      context: api
      dockerfile: docker/Dockerfile.prod
      target: prod
      args:
        VERSION: "2"
        FROM_ENV:
        UNSET:
      labels:
        team: core
      cache_from: [shop/api:cache]
`})
	res, err := Load(context.Background(), Options{Files: []string{filepath.Join(dir, "compose.yaml")}, Environ: []string{"FROM_ENV=e"}, BindName: testBinds})
	require.NoError(t, err)
	web := svcOf(t, res.Spec, "web")
	assert.Equal(t, "", web.Image, "the build's tag is set when it runs")
	assert.Equal(t, &core.BuildSpec{Context: filepath.Join(dir, "web")}, web.Build)
	api := svcOf(t, res.Spec, "api")
	assert.Equal(t, "shop/api:2", api.Image)
	assert.Equal(t, &core.BuildSpec{Context: filepath.Join(dir, "api"), Dockerfile: "docker/Dockerfile.prod", Target: "prod",
		Args: map[string]string{"VERSION": "2", "FROM_ENV": "e"}, Labels: map[string]string{"team": "core"}}, api.Build)
	assert.Contains(t, string(res.Manifest), "[services.web.build]\ncontext = 'web'\n")
	assert.Contains(t, res.Notes, "api: build.cache_from is not used: the engine's build cache decides")

	// The converted manifest, saved in the project directory, loads to
	// the same builds.
	spec, err := manifest.Parse("converted.toml", res.Manifest)
	require.NoError(t, err)
	assert.Equal(t, "web", svcOf(t, spec, "web").Build.Context)
}
