package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// notifyReceiver is a local webhook receiver: it answers the first
// failFirst POSTs with 500, then 204, and keeps every document.
type notifyReceiver struct {
	mu        sync.Mutex
	failFirst int
	posts     int
	docs      []engine.Notification
	raw       []string
	srv       *httptest.Server
}

func newNotifyReceiver(t *testing.T, failFirst int) *notifyReceiver {
	r := &notifyReceiver{failFirst: failFirst}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.posts++
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" || r.posts <= r.failFirst {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var n engine.Notification
		if err := json.Unmarshal(body, &n); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.docs = append(r.docs, n)
		r.raw = append(r.raw, string(body))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// notified waits until the engine's queued webhook deliveries are done.
func notified(t *testing.T, h *coretest.Harness) {
	t.Helper()
	require.True(t, h.Engine.WaitNotifications(h.Ctx()), "the webhook deliveries end within the test's context")
}

func (r *notifyReceiver) got() ([]engine.Notification, []string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]engine.Notification(nil), r.docs...), append([]string(nil), r.raw...), r.posts
}

// notifySpec is the seeded blog app at image :1.5 with a secret env and a
// [notify] webhook to url.
func notifySpec(url, image string) core.AppSpec {
	web := coretest.WebSpec(0)
	web.Image = image
	web.Env = map[string]string{"API_TOKEN": "public-but-private-value"}
	spec := coretest.BlogApp(web)
	spec.Notify = &core.NotifySpec{Webhook: url}
	return spec
}

// TestNotify_DeployAndRollbackOutcomesArePosted: a deploy's success, a
// failed deploy and a rollback each POST one document after the outcome is
// journaled, with app, op, verb, revision, outcome, error and durations;
// a 500 is retried; no env value is sent.
func TestNotify_DeployAndRollbackOutcomesArePosted(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	recv := newNotifyReceiver(t, 1)
	rev, err := h.Engine.SubmitRevision(h.Ctx(), notifySpec(recv.srv.URL, "registry.example/blog:1.5"), "sha-15")
	require.NoError(t, err)
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)

	notified(t, h)
	docs, raw, posts := recv.got()
	require.Len(t, docs, 1, "one document per outcome")
	assert.Equal(t, 2, posts, "the first answer was 500: retried once")
	d := docs[0]
	assert.Equal(t, 1, d.Schema)
	assert.Equal(t, "blog", d.App)
	assert.Equal(t, res.Op.ID, d.Op)
	assert.Equal(t, "deploy", d.Verb)
	assert.Equal(t, rev.ID, d.Revision)
	assert.Equal(t, core.OutcomeSuccess, d.Outcome)
	assert.Empty(t, d.Error)
	assert.False(t, d.FinishedAt.Before(d.StartedAt))
	require.Len(t, d.Services, 1)
	assert.Equal(t, "web", d.Services[0].Service)
	assert.Equal(t, core.StepSucceeded, d.Services[0].State)
	assert.NotContains(t, raw[0], "public-but-private-value", "no env value, secret or log line is sent")
	stored, err := h.Store.LoadOp(h.Ctx(), "blog", res.Op.ID)
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, stored.Outcome, "the outcome was journaled before")

	// A failed deploy: its document says failed, with the error.
	bad, err := h.Engine.SubmitRevision(h.Ctx(), notifySpec(recv.srv.URL, "registry.example/blog:broken"), "sha-bad")
	require.NoError(t, err)
	h.Runtime.Fail(coretest.MResolve, "registry.example/blog:broken", fmt.Errorf("%w: no such image", core.ErrNotFound), 0)
	_, derr := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: bad.ID})
	require.Error(t, derr)
	notified(t, h)
	docs, _, _ = recv.got()
	require.Len(t, docs, 2)
	assert.Equal(t, core.OutcomeFailed, docs[1].Outcome)
	assert.Equal(t, bad.ID, docs[1].Revision)
	assert.Contains(t, docs[1].Error, "no such image")

	// A rollback is notified as a rollback of its target.
	rb, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog", ToRevision: rev.ID})
	require.NoError(t, err)
	notified(t, h)
	docs, _, _ = recv.got()
	require.Len(t, docs, 3)
	assert.Equal(t, "rollback", docs[2].Verb)
	assert.Equal(t, rb.Op.ID, docs[2].Op)
	assert.Equal(t, rev.ID, docs[2].RollbackTo)
	assert.Equal(t, core.OutcomeSuccess, docs[2].Outcome)
}

// TestNotify_UndeliverableNeverChangesTheOutcome: a receiver that always
// fails gets NotifyTries attempts; the deploy succeeds all the same, within
// the notification budget, and the failure is reported once.
func TestNotify_UndeliverableNeverChangesTheOutcome(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	recv := newNotifyReceiver(t, 1000)
	var notices []string
	h.Engine.NotifyFailed = func(msg string) { notices = append(notices, msg) }
	rev, err := h.Engine.SubmitRevision(h.Ctx(), notifySpec(recv.srv.URL, "registry.example/blog:1.5"), "sha-15")
	require.NoError(t, err)
	t0 := time.Now()
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	assert.Less(t, time.Since(t0), engine.NotifyBudget+10*time.Second)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	notified(t, h)
	_, _, posts := recv.got()
	assert.Equal(t, engine.NotifyTries, posts)
	require.Len(t, notices, 1)
	assert.Contains(t, notices[0], "not delivered")
	assert.False(t, h.Store.Locked("blog"), "the app lock was released")
}

// TestNotify_FailedRecoveryOfThePassOncePerError: a pass that cannot
// recover an app notifies verb reconcile, outcome failed, with the error;
// the same failure in the next pass is not sent again.
func TestNotify_FailedRecoveryOfThePassOncePerError(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	recv := newNotifyReceiver(t, 0)
	rev, err := h.Engine.SubmitRevision(h.Ctx(), notifySpec(recv.srv.URL, "registry.example/blog:1.4"), "sha-14")
	require.NoError(t, err)
	h.Runtime.Fail(coretest.MInspect, "c-old", errors.New("engine hiccup"), 0)
	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.Error(t, err)
	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.Error(t, err)
	notified(t, h)
	docs, _, _ := recv.got()
	require.Len(t, docs, 1, "the same failure is sent once")
	assert.Equal(t, "reconcile", docs[0].Verb)
	assert.Equal(t, rev.ID, docs[0].Revision)
	assert.Equal(t, core.OutcomeFailed, docs[0].Outcome)
	assert.Contains(t, docs[0].Error, "engine hiccup")
}

// TestNotify_AutomaticRollbackIsPostedAsARollback: an automatic rollback
// (R76, here of a single-writer service) reaches the receiver as its own
// event "rollback" document, before the failed deploy's outcome, which
// also lists it under rollbacks.
func TestNotify_AutomaticRollbackIsPostedAsARollback(t *testing.T) {
	h := seqMonitorHarness(t, 10, 5)
	recv := newNotifyReceiver(t, 0)
	spec := coretest.BlogApp(withVolume(monitoredWeb(10 * time.Second)))
	spec.Notify = &core.NotifySpec{Webhook: recv.srv.URL}
	rev, err := h.Engine.SubmitRevision(h.Ctx(), spec, "sha-auto-rollback")
	require.NoError(t, err)
	prev, ok := h.Store.Active("blog")
	require.True(t, ok)
	h.Reset()
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.Error(t, err)

	notified(t, h)
	docs, raw, _ := recv.got()
	require.Len(t, docs, 2, "the rollback's document, then the deploy's")
	rb := docs[0]
	assert.Equal(t, engine.EventRollback, rb.Event)
	assert.Equal(t, "rollback", rb.Verb)
	assert.True(t, rb.Automatic)
	assert.Equal(t, res.Op.ID, rb.Op, "the deploy it happened in")
	assert.Equal(t, rev.ID, rb.Revision)
	assert.Equal(t, prev.Services["web"].EffectiveRevision, rb.RollbackTo)
	assert.Equal(t, core.OutcomeSuccess, rb.Outcome, "the previous generation serves again")
	require.NotNil(t, rb.Rollback)
	assert.Equal(t, "web", rb.Rollback.Service)
	assert.Equal(t, "sequential", rb.Rollback.Flow)
	assert.Equal(t, "error_rate", rb.Rollback.Reason)
	assert.InDelta(t, 0.5, rb.Rollback.ErrorRate, 1e-9)
	assert.InDelta(t, 0.1, rb.Rollback.MaxErrorRate, 1e-9)
	assert.GreaterOrEqual(t, rb.Rollback.Requests, int64(20))
	assert.Equal(t, int64(10_000), rb.Rollback.WindowMS)
	assert.Equal(t, "c-old", rb.Rollback.RestoredGeneration)
	assert.Equal(t, "c-new", rb.Rollback.ReplacedGeneration)
	assert.True(t, rb.Rollback.Restored)
	assert.False(t, rb.Rollback.DataRestored)
	assert.Contains(t, raw[0], `"event":"rollback"`)
	assert.Contains(t, raw[0], `"data_restored":false`)

	out := docs[1]
	assert.Equal(t, engine.EventOutcome, out.Event)
	assert.Equal(t, "deploy", out.Verb)
	assert.False(t, out.Automatic)
	assert.Equal(t, core.OutcomeFailed, out.Outcome)
	assert.Contains(t, out.Error, "automatic rollback of service web")
	require.Len(t, out.Rollbacks, 1)
	assert.Equal(t, *rb.Rollback, out.Rollbacks[0])
	assert.Nil(t, out.Rollback)
}

// TestNotify_NoRollbackNoRollbackDocument: a watched deploy whose window
// ends clean sends only its outcome, with no rollbacks.
func TestNotify_NoRollbackNoRollbackDocument(t *testing.T) {
	h := monitorHarness(t, 10, 0)
	recv := newNotifyReceiver(t, 0)
	spec := coretest.BlogApp(monitoredWeb(50 * time.Millisecond))
	spec.Notify = &core.NotifySpec{Webhook: recv.srv.URL}
	rev, err := h.Engine.SubmitRevision(h.Ctx(), spec, "sha-kept")
	require.NoError(t, err)
	h.Reset()
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	notified(t, h)
	docs, raw, _ := recv.got()
	require.Len(t, docs, 1)
	assert.Equal(t, engine.EventOutcome, docs[0].Event)
	assert.Equal(t, core.OutcomeSuccess, docs[0].Outcome)
	assert.Empty(t, docs[0].Rollbacks)
	assert.NotContains(t, raw[0], "rollback")
}
