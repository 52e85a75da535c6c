package manifest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// web is the base app whose service web has keys and a public host.
func web(keys string) string {
	return base + keys + "[[services.web.http]]\nport = 80\nhost = \"a.example\"\n"
}

// TestR81_ManifestSleepAfter: sleep_after and wake_ignore on a service
// reached through the edge.
func TestR81_ManifestSleepAfter(t *testing.T) {
	spec, err := Parse("app.toml", []byte(web("sleep_after = \"15m\"\nwake_ignore = [\"/robots.txt\", \"/static/*\"]\n")))
	require.NoError(t, err)
	assert.Equal(t, 15*time.Minute, spec.Services[0].SleepAfter.D())
	assert.Equal(t, []string{"/robots.txt", "/static/*"}, spec.Services[0].WakeIgnore)
}

// TestR81_ManifestSleepRefusals: a service others depend on sleeps only
// with them; a service nothing would wake, a UDP one, a one-shot and a
// malformed path are refused, each saying what to do.
func TestR81_ManifestSleepRefusals(t *testing.T) {
	db := "[services.db]\nimage = \"postgres:16\"\nsleep_after = \"10m\"\n"
	checkRefusals(t, []refusalCase{
		{"awake dependant", web("depends_on = [\"db\"]\n") + db, "services.db.sleep_after",
			"web depends on db and does not sleep: a sleeping db would stop under it; give web a sleep_after too, or remove this one"},
		{"nothing wakes it", base + "sleep_after = \"10m\"\n", "services.web.sleep_after",
			"nothing would wake web: it has no public HTTP host and no published TCP port, and no sleeping service depends on it; add one, or remove sleep_after"},
		{"range", web("sleep_after = \"1s\"\n"), "services.web.sleep_after", "1s is out of range: want from 2s to 720h"},
		{"path", web("sleep_after = \"10m\"\nwake_ignore = [\"robots.txt\"]\n"), "services.web.wake_ignore[0]",
			`"robots.txt": want a request path starting with /, such as "/robots.txt", or a prefix ending in *, such as "/static/*"`},
		{"ignore without sleep", web("wake_ignore = [\"/robots.txt\"]\n"), "services.web.wake_ignore",
			"wake_ignore lists paths that do not wake a sleeping service, and this service never sleeps: set sleep_after, or remove wake_ignore"},
	})
	spec, err := Parse("app.toml", []byte(web("sleep_after = \"10m\"\ndepends_on = [\"db\"]\n")+db))
	require.NoError(t, err, "db sleeps with the only service that depends on it")
	assert.Equal(t, 10*time.Minute, spec.Services[0].SleepAfter.D())
}
