package manifest

import (
	"time"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

const snapshotsBase = base + "[[services.web.volume]]\nname = \"data\"\npath = \"/data\"\n"

// [services.X.snapshots] takes before_deploy and keep; absent, the policy
// is auto with keep 5.
func TestSnapshots_ManifestPolicy(t *testing.T) {
	spec, err := Parse("app.toml", []byte(snapshotsBase+"[services.web.snapshots]\nbefore_deploy = \"always\"\nkeep = 3\n"))
	require.NoError(t, err)
	p, keep := snapshot.Policy(&spec.Services[0])
	assert.Equal(t, snapshot.PolicyAlways, p)
	assert.Equal(t, 3, keep)

	spec, err = Parse("app.toml", []byte(snapshotsBase))
	require.NoError(t, err)
	p, keep = snapshot.Policy(&spec.Services[0])
	assert.Equal(t, snapshot.PolicyAuto, p)
	assert.Equal(t, snapshot.DefaultKeep, keep)
}

// Each malformed snapshots table is refused at its key.
func TestSnapshots_ManifestRefusals(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"no volume", base + "[services.web.snapshots]\nkeep = 2\n", "services.web.snapshots",
			"this service declares no [[volume]], so there is nothing to snapshot; remove [snapshots]"},
		{"policy", snapshotsBase + "[services.web.snapshots]\nbefore_deploy = \"sometimes\"\n", "services.web.snapshots.before_deploy",
			`"sometimes": want "auto" (volumes up to 1 GiB, a warning above), "always" or "never"`},
		{"keep", snapshotsBase + "[services.web.snapshots]\nkeep = 0\n", "services.web.snapshots.keep",
			"0 is out of range: want how many snapshots to keep, from 1 to 100"},
	})
}

// [services.X.backup]: every or a cron schedule, and keep (default 7).
func TestBackup_ManifestSchedule(t *testing.T) {
	spec, err := Parse("app.toml", []byte(snapshotsBase+"[services.web.backup]\nevery = \"4s\"\nkeep = 2\n"))
	require.NoError(t, err)
	s := &spec.Services[0]
	on, keep := snapshot.BackupPolicy(s)
	assert.True(t, on)
	assert.Equal(t, 2, keep)
	t0 := time.Date(2026, 12, 4, 2, 0, 0, 0, time.UTC)
	assert.Equal(t, t0.Add(4*time.Second), snapshot.NextBackup(s, t0))

	spec, err = Parse("app.toml", []byte(snapshotsBase+"[services.web.backup]\nschedule = \"0 3 * * *\"\n"))
	require.NoError(t, err)
	s = &spec.Services[0]
	on, keep = snapshot.BackupPolicy(s)
	assert.True(t, on)
	assert.Equal(t, snapshot.DefaultBackupKeep, keep)
	assert.Equal(t, time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC), snapshot.NextBackup(s, t0).UTC(), "cron fields are read in UTC")

	spec, err = Parse("app.toml", []byte(snapshotsBase))
	require.NoError(t, err)
	on, _ = snapshot.BackupPolicy(&spec.Services[0])
	assert.False(t, on)
}

// With command, a backup is an online dump: a service without a volume
// (a database on a bind mount) may have one, and its timeout is read.
func TestBackup_ManifestCommandIsAnOnlineDump(t *testing.T) {
	spec, err := Parse("app.toml", []byte(base+"[services.web.backup]\nevery = \"24h\"\ncommand = [\"pg_dumpall\", \"-U\", \"postgres\"]\ntimeout = \"20m\"\n"))
	require.NoError(t, err)
	s := &spec.Services[0]
	on, _ := snapshot.BackupPolicy(s)
	assert.True(t, on)
	assert.Equal(t, []string{"pg_dumpall", "-U", "postgres"}, s.BackupCommand)
	assert.Equal(t, core.Duration(20*time.Minute), s.BackupTimeout)
}

// Each malformed backup table is refused at its key.
func TestBackup_ManifestRefusals(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"no volume", base + "[services.web.backup]\nevery = \"24h\"\n", "services.web.backup",
			`this service declares no [[volume]], so there is nothing to snapshot; remove [backup], or set command to a program whose output is the backup (e.g. ["pg_dumpall", "-U", "postgres"])`},
		{"empty command", snapshotsBase + "[services.web.backup]\nevery = \"1h\"\ncommand = []\n", "services.web.backup.command",
			`want the program and its arguments, whose output is the backup, e.g. ["pg_dumpall", "-U", "postgres"] (no shell; use ["sh", "-c", "…"] for one)`},
		{"timeout without command", snapshotsBase + "[services.web.backup]\nevery = \"1h\"\ntimeout = \"5m\"\n", "services.web.backup.timeout",
			"timeout bounds an online dump: set command too, or remove timeout"},
		{"timeout", base + "[services.web.backup]\nevery = \"1h\"\ncommand = [\"dump\"]\ntimeout = \"0s\"\n", "services.web.backup.timeout",
			"0s is out of range: want from 1s to 24h"},
		{"neither", snapshotsBase + "[services.web.backup]\nkeep = 2\n", "services.web.backup",
			`missing: set every (such as "24h") or schedule (such as "0 3 * * *")`},
		{"both", snapshotsBase + "[services.web.backup]\nevery = \"1h\"\nschedule = \"@daily\"\n", "services.web.backup",
			`set either every (such as "24h") or schedule (such as "0 3 * * *"), not both`},
		{"schedule", snapshotsBase + "[services.web.backup]\nschedule = \"at three\"\n", "services.web.backup.schedule",
			`schedule "at three": expected exactly 5 fields, found 2: [at three]; want "@every 1h", a descriptor (@hourly, @daily, @weekly, @monthly, @yearly), or five cron fields (minute hour day-of-month month day-of-week) such as "0 3 * * *"`},
		{"every", snapshotsBase + "[services.web.backup]\nevery = \"0s\"\n", "services.web.backup.every",
			"0s is out of range: want from 1s to 8760h"},
		{"keep", snapshotsBase + "[services.web.backup]\nevery = \"1h\"\nkeep = 101\n", "services.web.backup.keep",
			"101 is out of range: want how many scheduled backups to keep, from 1 to 100"},
	})
}
