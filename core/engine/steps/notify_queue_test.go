package steps

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNotifyQueue_BoundedAndNeverBlocks: with the webhook stuck on its
// first POST, queuing more than NotifyQueue outcomes never blocks the
// caller; the excess is dropped with a notice each; once the webhook
// answers, the queue drains.
func TestNotifyQueue_BoundedAndNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	dropped := 0
	e := &Engine{State: &State{}, NotifyFailed: func(string) { mu.Lock(); dropped++; mu.Unlock() }}
	for i := 0; i < NotifyQueue+10; i++ {
		e.postNotification(srv.URL, Notification{App: "blog"})
	}
	mu.Lock()
	// The first job may already be taken by the delivery goroutine.
	assert.GreaterOrEqual(t, dropped, 9)
	assert.LessOrEqual(t, dropped, 10)
	mu.Unlock()
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.True(t, e.WaitNotifications(ctx))
}

// TestRedactWebhook_NoPathNoQuery: what logs and notices show of a
// webhook URL, and of an error naming it.
func TestRedactWebhook_NoPathNoQuery(t *testing.T) {
	raw := "https://hooks.example.com/services/T0/B0/SECRET?token=hunter2"
	assert.Equal(t, "https://hooks.example.com/…", RedactWebhook(raw))
	assert.Equal(t, "https://hooks.example.com", RedactWebhook("https://hooks.example.com"))
	assert.Equal(t, "[notify] webhook", RedactWebhook("::"))
	err := errors.New(`Post "` + raw + `": dial tcp: lookup hooks.example.com: no such host; path /services/T0/B0/SECRET token=hunter2`)
	got := RedactWebhookError(raw, err)
	assert.NotContains(t, got, "SECRET")
	assert.NotContains(t, got, "hunter2")
	assert.Contains(t, got, "https://hooks.example.com/…")
}
