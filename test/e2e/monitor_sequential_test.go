package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// webhookDocs is a local [notify] receiver on loopback: it keeps every
// JSON document POSTed to it, in order.
type webhookDocs struct {
	mu   sync.Mutex
	docs []map[string]any
	srv  *httptest.Server
}

func newWebhookDocs(t *testing.T) *webhookDocs {
	w := &webhookDocs{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.docs = append(w.docs, doc)
		w.mu.Unlock()
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *webhookDocs) got() []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.docs)
}

// mostRunning replays docker's start/die events and returns the most
// containers that ran at once.
func mostRunning(evs []fixture.Event, initially []string) int {
	running := map[string]bool{}
	for _, id := range initially {
		running[id] = true
	}
	most := len(running)
	for _, ev := range evs {
		switch ev.Status {
		case "start":
			running[ev.ID] = true
		case "die", "destroy":
			for id := range running {
				if strings.HasPrefix(ev.ID, id) || strings.HasPrefix(id, ev.ID) {
					delete(running, id)
				}
			}
		}
		most = max(most, len(running))
	}
	return most
}

// R76.8 against the real engine, with the webhook: a single-writer (volume)
// web service, v1 serving; v2 passes readiness but answers 500 on /. The
// deploy rolls back by itself: the local receiver gets v1's success, then
// the event "rollback" document, then the failed deploy listing it; docker
// never ran two generations at once; the original v1 container serves
// again.
func TestR76_SequentialRollbackAndWebhookDocuments(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	const host = "monseq.test"
	recv := newWebhookDocs(t)
	a := fixture.NewApp(t, "e2emonseq")
	common := `[[services.web.volume]]
name = "data"
path = "/data"
[notify]
webhook = "` + recv.srv.URL + `/hook"
`
	a.MustDeploy(webManifest(a.Name, v1, host, common))
	good := fixture.Managed(t, a.Name, "web")
	require.Len(t, good, 1)
	docs := recv.got()
	require.Len(t, docs, 1, "v1's deploy is notified")
	require.Equal(t, "outcome", docs[0]["event"])
	require.Equal(t, "success", docs[0]["outcome"])

	ev := fixture.WatchEvents(t, a.Name)
	l := fixture.StartLoad(t, "http://"+a.Edge.HTTPAddr+"/", host, 1, nil)
	t0 := time.Now()
	op, r := a.Deploy(webManifest(a.Name, v2, host, common+`[services.web.env]
FAIL_ROOT = "true"
[services.web.monitor]
window = "10s"
max_error_rate = 0.05
min_requests = 5
`))
	st := l.Stop()
	events := ev.Stop()
	t.Logf("bad deploy took %s; load during it: %s", time.Since(t0).Round(time.Millisecond), st)
	require.NotEqual(t, 0, r.Code, r.String())
	require.NotEqual(t, "success", op.Outcome)
	require.Contains(t, r.Stderr, "automatic rollback of service web: error rate", r.String())
	require.Contains(t, r.Stderr, "restored the code, not the data", r.String())
	require.Equal(t, 1, mostRunning(events, good), "never two generations running: %v", events)

	docs = recv.got()
	require.Len(t, docs, 3, "v1's success, the rollback, the failed deploy: %v", docs)
	rb, out := docs[1], docs[2]
	require.Equal(t, "rollback", rb["event"])
	require.Equal(t, "rollback", rb["verb"])
	require.Equal(t, true, rb["automatic"])
	require.Equal(t, op.ID, rb["op"])
	require.Equal(t, "success", rb["outcome"])
	detail, ok := rb["rollback"].(map[string]any)
	require.True(t, ok, "%v", rb)
	require.Equal(t, "sequential", detail["flow"])
	require.Equal(t, true, detail["restored"])
	require.Equal(t, false, detail["data_restored"])
	require.Greater(t, detail["error_rate"], 0.05)
	require.Equal(t, "outcome", out["event"])
	require.Equal(t, "failed", out["outcome"])
	require.Len(t, out["rollbacks"], 1)

	require.Equal(t, good, fixture.Managed(t, a.Name, "web"), "only the original v1 container remains")
	require.Equal(t, good, fixture.Running(a.Name, "web"))
	require.Eventually(t, func() bool {
		code, body, err := a.Edge.Get(host, "/")
		return err == nil && code == 200 && versionOf(body) == "v1"
	}, 5*time.Second, 50*time.Millisecond, "the restored v1 generation answers")
}
