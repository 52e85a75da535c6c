package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

func revExecManifest(app, image, version, readyAfter string) string {
	return fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "2s"
[services.web.env]
VERSION = %q
READY_AFTER = %q
[[services.web.http]]
port = 8080
host = "revs.test"
[services.web.readiness]
type = "http"
path = "/healthz"
timeout = "30s"
`, app, image, version, readyAfter)
}

// TestRevisionsRollbackExecAndLockWait: `revisions` lists each revision
// with its outcome and the serving one; a rollback is journaled and shown
// as a rollback of its target; `exec` runs in the serving container and
// exits with the command's status; a verb that finds the app locked says
// so at once and names the holder.
func TestRevisionsRollbackExecAndLockWait(t *testing.T) {
	imgs := testimages.Require(t, "v1", "httpd")
	a := fixture.NewApp(t, "e2erevs")
	a.MustDeploy(revExecManifest(a.Name, imgs["httpd"], "one", "0s"))
	a.MustDeploy(revExecManifest(a.Name, imgs["httpd"], "two", "0s"))

	r := a.Gordon("rollback", a.Name)
	require.Equal(t, 0, r.Code, r.String())
	_, body, err := a.Edge.Get("revs.test", "/")
	require.NoError(t, err)
	require.Contains(t, body, "version=one", "the rollback serves the first revision again")

	r = a.Gordon("ops", a.Name)
	require.Equal(t, 0, r.Code, r.String())
	require.Regexp(t, `(?m)^op-\S+\s+rollback\s+rev-3 \(= rev-1\)\s.*success`, r.Stdout, "ops names the rollback a rollback")

	r = a.Gordon("revisions", a.Name, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var revs []struct {
		Revision   string    `json:"revision"`
		Outcome    string    `json:"outcome"`
		Verb       string    `json:"verb"`
		RollbackTo string    `json:"rollback_to"`
		Serving    bool      `json:"serving"`
		CreatedAt  time.Time `json:"created_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &revs), r.Stdout)
	require.Len(t, revs, 3)
	for i, want := range []struct {
		id, verb, to string
		serving      bool
	}{{"rev-1", "deploy", "", false}, {"rev-2", "deploy", "", false}, {"rev-3", "rollback", "rev-1", true}} {
		assert.Equal(t, want.id, revs[i].Revision)
		assert.Equal(t, "success", revs[i].Outcome)
		assert.Equal(t, want.verb, revs[i].Verb)
		assert.Equal(t, want.to, revs[i].RollbackTo)
		assert.Equal(t, want.serving, revs[i].Serving, "%s serving", want.id)
		assert.False(t, revs[i].CreatedAt.IsZero())
	}
	r = a.Gordon("revisions", a.Name)
	require.Equal(t, 0, r.Code, r.String())
	require.Regexp(t, `(?m)^rev-3 \(desired\)\s+\S+ \S+\s+success\s+rollback \(rev-1\)\s+op-\S+\s+serving\s+web$`, r.Stdout)

	// exec: the container's own loopback answers, so the command ran in the
	// serving container; its exit status and stderr come back.
	r = a.Gordon("exec", a.Name, "web", "--", "/httpd", "-get", "http://127.0.0.1:8080/healthz")
	require.Equal(t, 0, r.Code, r.String())
	r = a.Gordon("exec", a.Name, "web", "--", "/httpd", "-get", "http://127.0.0.1:1/")
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, "connection refused")
	r = a.Gordon("exec", a.Name, "db", "--", "/httpd")
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, `no serving service "db" (serving: web)`)

	// Lock wait: a deploy whose candidate is slow to be ready holds the
	// lock; a restart meanwhile says at once whom it waits for.
	a.Write(revExecManifest(a.Name, imgs["httpd"], "three", "4s"))
	deployDone := make(chan fixture.Result, 1)
	go func() { deployDone <- fixture.Gordon(t, a.State, "deploy", "-f", a.File) }()
	lockRec := filepath.Join(a.State, "apps", a.Name, "lock.json")
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(lockRec)
		return err == nil && strings.Contains(string(b), `"deploy"`)
	}, 30*time.Second, 20*time.Millisecond, "the deploy never took the app lock")
	r = a.Gordon("restart", a.Name)
	require.Equal(t, 0, r.Code, r.String())
	require.Regexp(t, regexp.MustCompile(`app e2erevs: restart waits for the app lock, held by pid \d+ \(deploy, since \S+, host \S+\); waiting up to 1m0s \(--lock-timeout\)`), r.Stderr)
	d := <-deployDone
	require.Equal(t, 0, d.Code, d.String())
}
