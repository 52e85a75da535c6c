package engine_test

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// syncBuffer is a bytes.Buffer safe for the delivery goroutine's log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNotify_WebhookTokenNeverPrinted: an undeliverable webhook whose
// token is in its path and query is reported (log and CLI notice) by its
// scheme and host only.
func TestNotify_WebhookTokenNeverPrinted(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there: every POST fails to connect
	var logs syncBuffer
	h.Engine.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	var mu sync.Mutex
	var notices []string
	h.Engine.NotifyFailed = func(msg string) { mu.Lock(); notices = append(notices, msg); mu.Unlock() }
	url := "http://" + addr + "/services/T000/B000/XXXXSLACKSECRET?token=hunter2"
	rev, err := h.Engine.SubmitRevision(h.Ctx(), notifySpec(url, "registry.example/blog:1.5"), "sha-15")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	h.Engine.WaitNotifications(h.Ctx())

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, notices, 1)
	assert.Contains(t, notices[0], "not delivered to its [notify] webhook http://"+addr+"/…")
	for _, out := range []string{notices[0], logs.String()} {
		assert.NotContains(t, out, "XXXXSLACKSECRET")
		assert.NotContains(t, out, "hunter2")
		assert.NotContains(t, out, "/services/")
	}
	assert.Contains(t, logs.String(), "webhook not delivered")
	assert.NotContains(t, logs.String(), "[WARN]", "the failure reaches the user once, through NotifyFailed, not also as a logged warning")
}

// TestNotify_RedirectIsNotFollowed: a webhook answering 307 elsewhere is
// a failed delivery; the document never reaches the redirect's target.
func TestNotify_RedirectIsNotFollowed(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	var elsewhere atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(target.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/internal", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	var failed atomic.Int32
	h.Engine.NotifyFailed = func(string) { failed.Add(1) }
	rev, err := h.Engine.SubmitRevision(h.Ctx(), notifySpec(redirector.URL+"/hook", "registry.example/blog:1.5"), "sha-15")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	h.Engine.WaitNotifications(h.Ctx())
	assert.Zero(t, elsewhere.Load(), "the redirect was not followed")
	assert.Equal(t, int32(1), failed.Load(), "a 3xx is a failed delivery")
}

// TestNotify_SlowWebhookNeverDelaysTheDeploy: the deploy returns its
// outcome while its webhook still holds the POST; the document is
// delivered once the webhook answers.
func TestNotify_SlowWebhookNeverDelaysTheDeploy(t *testing.T) {
	h := lcSeed(t, "c-old", 17000, 0)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var delivered atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	rev, err := h.Engine.SubmitRevision(h.Ctx(), notifySpec(slow.URL, "registry.example/blog:1.5"), "sha-15")
	require.NoError(t, err)
	res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Zero(t, delivered.Load(), "the deploy returned before its webhook answered")
	<-entered
	close(release)
	require.True(t, h.Engine.WaitNotifications(h.Ctx()))
	assert.Equal(t, int32(1), delivered.Load(), "delivered once the webhook answered, on its first attempt")
}
