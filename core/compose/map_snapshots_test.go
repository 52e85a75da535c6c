package compose

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docs/data.md: x-gordon.snapshots and x-gordon.backup map onto
// [services.X.snapshots] and [services.X.backup]; the manifest's rules
// apply (a backup needs a volume).
func TestCompose_XGordonSnapshotsAndBackup(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  db:
    image: db:1
    volumes: ["data:/var/lib/db"]
    x-gordon:
      snapshots: { before_deploy: always, keep: 3 }
      backup: { every: 24h, keep: 7 }
volumes:
  data: {}
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	s := svcOf(t, res.Spec, "db")
	assert.Equal(t, "always", s.SnapshotsBeforeDeploy)
	assert.Equal(t, 3, s.SnapshotsKeep)
	assert.Equal(t, 24*time.Hour, s.BackupEvery.D())
	assert.Equal(t, 7, s.BackupKeep)

	dir = writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: web:1
    expose: ["8080"]
    x-gordon: { backup: { schedule: "0 3 * * *" } }
`})
	_, err = load(t, dir, "compose.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nothing to snapshot")

	// An online dump needs no volume (a database on a bind mount, or one
	// whose data another service holds).
	dir = writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  db:
    image: postgres:16
    x-gordon: { backup: { every: 24h, command: [pg_dumpall, -U, postgres], timeout: 20m } }
`})
	res, err = load(t, dir, "compose.yaml")
	require.NoError(t, err)
	s = svcOf(t, res.Spec, "db")
	assert.Equal(t, []string{"pg_dumpall", "-U", "postgres"}, s.BackupCommand)
	assert.Equal(t, 20*time.Minute, s.BackupTimeout.D())
}
