package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// jobsManifest serves the scratch httpd as web with two jobs run by the
// same image (its ENTRYPOINT is /httpd, so a job's command is its
// arguments): ping GETs web by its service name on the app network every
// 4 s; broken GETs a closed port (exit 1) once a year.
func jobsManifest(app, image string) string {
	return fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "2s"
[[services.web.http]]
port = 8080
host = "jobs.test"
[services.web.readiness]
type = "http"
path = "/healthz"
timeout = "30s"

[jobs.ping]
service = "web"
schedule = "@every 4s"
command = ["-get", "http://web:8080/healthz"]
timeout = "30s"

[jobs.broken]
service = "web"
schedule = "@yearly"
command = ["-get", "http://web:1/"]
`, app, image)
}

// jobOp is the part of `ops --format json` a job's run shows.
type jobOp struct {
	ID      string `json:"id"`
	Verb    string `json:"verb"`
	Outcome string `json:"outcome"`
	Steps   []struct {
		ID, State, After, Detail, Error, Result string
		Diagnostics                             []string
	} `json:"steps"`
}

func jobOps(t *testing.T, a *fixture.App, job string) []jobOp {
	t.Helper()
	r := a.Gordon("ops", a.Name, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var ops []jobOp
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &ops))
	var out []jobOp
	for _, op := range ops {
		if op.Verb == "job" && len(op.Steps) > 0 && op.Steps[0].ID == "job."+job {
			out = append(out, op)
		}
	}
	return out
}

// TestJobs_ScheduledJobRunsUnderTheWatcherAndJobsRunReportsAFailure (real
// engine): under `reconcile --watch` a job at "@every 4s" runs in a new
// container that reaches web by its name on the app network, and is
// journaled as verb job with outcome success, exit 0; `jobs ls` shows its
// last and next run. `jobs run` of a failing command exits with its
// status, journals outcome failed with the command's output, which
// `logs --job` shows; no run leaves a container behind.
func TestJobs_ScheduledJobRunsUnderTheWatcherAndJobsRunReportsAFailure(t *testing.T) {
	imgs := testimages.Require(t, "v1", "httpd")
	a := fixture.NewApp(t, "e2ejobs")
	a.MustDeploy(jobsManifest(a.Name, imgs["httpd"]))

	ctx, cancel := context.WithCancel(context.Background())
	watch, wso, wse := fixture.Command(ctx, fixture.NormalBin(), a.State, nil, "reconcile", "--watch", "--interval", "1h")
	require.NoError(t, watch.Start())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			_ = watch.Wait()
			t.Logf("watcher stdout:\n%s\nstderr:\n%s", fixture.LastLines(wso.String(), 20), fixture.LastLines(wse.String(), 20))
		}
	}
	t.Cleanup(stop)

	var ran []jobOp
	require.Eventually(t, func() bool {
		for _, op := range jobOps(t, a, "ping") {
			if op.Outcome != "" {
				ran = append(ran, op)
			}
		}
		return len(ran) > 0
	}, 60*time.Second, 500*time.Millisecond, "the watcher runs ping within a minute")
	op := ran[0]
	assert.Equal(t, "success", op.Outcome, "%+v", op)
	assert.Equal(t, "succeeded", op.Steps[0].State)
	assert.Equal(t, "exit 0", op.Steps[0].Result)
	assert.Contains(t, op.Steps[0].Detail, "run by the schedule")
	assert.NotEmpty(t, op.Steps[0].After, "the run's container is journaled")

	r := a.Gordon("jobs", "ls", a.Name, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var list []struct {
		Name, Service, Schedule string
		LastRun                 *struct{ Op, Outcome string } `json:"last_run"`
		Next                    time.Time                     `json:"next_run"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &list))
	require.Len(t, list, 2)
	assert.Equal(t, "ping", list[1].Name)
	require.NotNil(t, list[1].LastRun)
	assert.False(t, list[1].Next.IsZero(), "a next run is shown")
	assert.Nil(t, list[0].LastRun, "broken never ran")
	stop()

	r = a.Gordon("jobs", "run", a.Name, "broken")
	require.Equal(t, 1, r.Code, "the job's exit status: %s", r.String())
	assert.Contains(t, r.Stdout, "connection refused", "the output is shown as it comes")
	assert.Contains(t, r.Stderr, "outcome failed")
	failed := jobOps(t, a, "broken")
	require.Len(t, failed, 1)
	assert.Equal(t, "failed", failed[0].Outcome)
	assert.Equal(t, "exit 1", failed[0].Steps[0].Result)
	assert.Contains(t, strings.Join(failed[0].Steps[0].Diagnostics, "\n"), "connection refused")

	r = a.Gordon("logs", a.Name, "--job", "broken")
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stdout, "connection refused")
	assert.Contains(t, r.Stderr, "op "+failed[0].ID)

	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.gordon.app="+a.Name, "--filter", "label=dev.gordon.role=job").Output()
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(string(out)), "no run leaves its container")
}
