package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

type notifyDoc struct {
	Schema     int    `json:"schema"`
	App        string `json:"app"`
	Op         string `json:"op"`
	Verb       string `json:"verb"`
	Revision   string `json:"revision"`
	RollbackTo string `json:"rollback_to"`
	Outcome    string `json:"outcome"`
	Error      string `json:"error"`
	DurationMS int64  `json:"duration_ms"`
}

// TestNotify_WebhookGetsSuccessFailureAndRollbackDocuments: a local
// receiver gets one document per operation outcome of the real CLI: a
// successful deploy, a failed one (its candidate never ready) and a
// rollback, each after the outcome is journaled.
func TestNotify_WebhookGetsSuccessFailureAndRollbackDocuments(t *testing.T) {
	imgs := testimages.Require(t, "v1", "httpd")
	var mu sync.Mutex
	var docs []notifyDoc
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var d notifyDoc
		if json.Unmarshal(body, &d) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		docs = append(docs, d)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	got := func() []notifyDoc {
		mu.Lock()
		defer mu.Unlock()
		return append([]notifyDoc(nil), docs...)
	}
	a := fixture.NewApp(t, "e2enotify")
	manifest := func(version string, neverReady bool) string {
		timeout := "60s"
		if neverReady {
			timeout = "8s"
		}
		return fmt.Sprintf(`name = %q
[notify]
webhook = %q
[services.web]
image = %q
stop_grace = "2s"
[services.web.env]
VERSION = %q
NEVER_READY = "%t"
[[services.web.http]]
port = 8080
host = "notify.test"
[services.web.readiness]
type = "http"
path = "/healthz"
timeout = %q
`, a.Name, srv.URL, imgs["httpd"], version, neverReady, timeout)
	}
	ok := a.MustDeploy(manifest("one", false))
	d := got()
	require.Len(t, d, 1, "one document after the deploy")
	assert.Equal(t, notifyDoc{Schema: 1, App: a.Name, Op: ok.ID, Verb: "deploy", Revision: "rev-1", Outcome: "success", DurationMS: d[0].DurationMS}, d[0])
	assert.Positive(t, d[0].DurationMS)

	bad, r := a.Deploy(manifest("two", true))
	require.Equal(t, 1, r.Code, r.String())
	d = got()
	require.Len(t, d, 2)
	assert.Equal(t, bad.ID, d[1].Op)
	assert.Equal(t, "rev-2", d[1].Revision)
	assert.Equal(t, "failed", d[1].Outcome)
	assert.Contains(t, d[1].Error, "web")

	r = a.Gordon("rollback", a.Name, "--to", "rev-1")
	require.Equal(t, 0, r.Code, r.String())
	d = got()
	require.Len(t, d, 3)
	assert.Equal(t, "rollback", d[2].Verb)
	assert.Equal(t, "rev-1", d[2].RollbackTo)
	assert.Equal(t, "success", d[2].Outcome)
}
