package compose

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestCompose_XGordonJobsMapOntoTheManifestsJobs: the project's
// x-gordon.jobs become [jobs.NAME], validated as the manifest validates
// them.
func TestCompose_XGordonJobsMapOntoTheManifestsJobs(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: web:1
    expose: ["8080"]
    x-gordon: { host: shop.example.com }
x-gordon:
  jobs:
    cleanup: { service: web, schedule: "@every 1h", command: [./manage, cleanup], timeout: 2m }
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	require.Len(t, res.Spec.Jobs, 1)
	assert.Equal(t, core.JobSpec{Name: "cleanup", Service: "web", Schedule: "@every 1h", Command: []string{"./manage", "cleanup"}, Timeout: core.Duration(120e9)}, res.Spec.Jobs[0])

	dir = writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: web:1
x-gordon:
  jobs:
    cleanup: { service: worker, schedule: "@every 1h", command: [x] }
`})
	_, err = load(t, dir, "compose.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `names service "worker", which this manifest does not declare`)
}

// A command given as one string is split into words as compose splits a
// service's command: quotes keep a shell script whole.
func TestCompose_AStringCommandIsSplitIntoShellWords(t *testing.T) {
	got, ok := stringList(`sh -c 'pg_dumpall -U postgres | gzip' "a b"`)
	require.True(t, ok)
	assert.Equal(t, []string{"sh", "-c", "pg_dumpall -U postgres | gzip", "a b"}, got)
	_, ok = stringList(`sh -c 'unbalanced`)
	assert.False(t, ok, "an unbalanced quote is refused, not guessed")
}
