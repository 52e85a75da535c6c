package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
