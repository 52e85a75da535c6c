package manifest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestManifest_Jobs: [jobs.NAME] names a declared service, a schedule,
// a command and an optional timeout; each missing or wrong key is said in
// the user's words.
func TestManifest_Jobs(t *testing.T) {
	doc := base + `
[jobs.cleanup]
service = "web"
schedule = "@every 1h"
command = ["./manage", "clearsessions"]
timeout = "2m"

[jobs.report]
service = "web"
schedule = "0 3 * * *"
command = ["sh", "-c", "echo hi"]
`
	spec, err := Parse("app.toml", []byte(doc))
	require.NoError(t, err)
	require.Len(t, spec.Jobs, 2)
	assert.Equal(t, core.JobSpec{Name: "cleanup", Service: "web", Schedule: "@every 1h", Command: []string{"./manage", "clearsessions"}, Timeout: core.Duration(2 * time.Minute)}, spec.Jobs[0])
	assert.Equal(t, "report", spec.Jobs[1].Name)
	assert.Zero(t, spec.Jobs[1].Timeout, "no timeout: the engine's default")

	job := func(body string) string { return base + "\n[jobs.cleanup]\n" + body }
	checkRefusals(t, []refusalCase{
		{"unknown service", job("service = \"worker\"\nschedule = \"@daily\"\ncommand = [\"x\"]\n"), "jobs.cleanup.service", `job cleanup names service "worker", which this manifest does not declare (declared: web)`},
		{"service required", job("schedule = \"@daily\"\ncommand = [\"x\"]\n"), "jobs.cleanup", `[jobs.cleanup] needs service = "NAME": the service whose image, env and secrets the job runs with (one of: web)`},
		{"bad schedule", job("service = \"web\"\nschedule = \"every hour\"\ncommand = [\"x\"]\n"), "jobs.cleanup.schedule", `schedule "every hour": expected exactly 5 fields, found 2: [every hour]; want "@every 1h", a descriptor (@hourly, @daily, @weekly, @monthly, @yearly), or five cron fields (minute hour day-of-month month day-of-week) such as "0 3 * * *"`},
		{"schedule required", job("service = \"web\"\ncommand = [\"x\"]\n"), "jobs.cleanup", `[jobs.cleanup] needs schedule: "@every 1h", "@daily" or five cron fields such as "0 3 * * *" (UTC)`},
		{"missing command", job("service = \"web\"\nschedule = \"@daily\"\n"), "jobs.cleanup", `[jobs.cleanup] needs command: a non-empty argv array such as ["./manage", "clearsessions"] (no shell; use ["sh", "-c", "…"] for one)`},
		{"empty command", job("service = \"web\"\nschedule = \"@daily\"\ncommand = []\n"), "jobs.cleanup", `[jobs.cleanup] needs command: a non-empty argv array such as ["./manage", "clearsessions"] (no shell; use ["sh", "-c", "…"] for one)`},
		{"timeout range", job("service = \"web\"\nschedule = \"@daily\"\ncommand = [\"x\"]\ntimeout = \"48h\"\n"), "jobs.cleanup.timeout", `48h is out of range: want from 1s to 24h`},
		{"unknown key", job("service = \"web\"\nschedule = \"@daily\"\ncommand = [\"x\"]\nevery = \"1h\"\n"), "jobs.cleanup.every", `unknown key "every": want one of service, schedule, command, timeout`},
		{"job name", base + "\n[jobs.Clean_Up]\nservice = \"web\"\nschedule = \"@daily\"\ncommand = [\"x\"]\n", "jobs.Clean_Up", `invalid job name "Clean_Up": want a DNS label: 1-63 lowercase letters, digits or '-', not starting or ending with '-'`},
	})
}
