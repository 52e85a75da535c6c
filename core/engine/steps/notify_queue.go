package steps

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
)

// NotifyQueue bounds the webhook deliveries waiting in one process: one
// entry per operation outcome (its documents together). A full queue drops
// the newest entry with a warning, so a slow or dead webhook never delays
// a deploy nor the reconcile pass, nor grows memory.
const NotifyQueue = 64

// notifyJob is one queued delivery: docs for url, sent by e's client,
// logger and NotifyFailed.
type notifyJob struct {
	e    *Engine
	url  string
	docs []Notification
}

// notifyQueue is the process's delivery queue: one goroutine, started on
// first use, sends the jobs in order; pending counts the jobs queued or
// being sent.
type notifyQueue struct {
	once    sync.Once
	jobs    chan notifyJob
	pending sync.WaitGroup
}

// postNotification queues docs for url and returns at once (see
// NotifyQueue). WaitNotifications waits for the queue to drain.
func (e *Engine) postNotification(url string, docs ...Notification) {
	q := &e.State.notifyQueue
	q.once.Do(func() {
		q.jobs = make(chan notifyJob, NotifyQueue)
		go func() {
			for j := range q.jobs {
				j.e.deliver(j.url, j.docs)
				q.pending.Done()
			}
		}()
	})
	q.pending.Add(1)
	select {
	case q.jobs <- notifyJob{e: e, url: url, docs: docs}:
	default:
		q.pending.Done()
		app := ""
		if len(docs) > 0 {
			app = docs[0].App
		}
		e.Log().Warn("notify: webhook queue full; notification dropped", "app", app, "webhook", RedactWebhook(url), "queued", NotifyQueue)
		if e.NotifyFailed != nil {
			e.NotifyFailed(fmt.Sprintf("app %s: notification not sent to its [notify] webhook %s: %d deliveries are already waiting", app, RedactWebhook(url), NotifyQueue))
		}
	}
}

// WaitNotifications waits until every queued webhook delivery is done, or
// ctx is done (false). A CLI verb calls it before exiting, bounded by
// NotifyBudget, so its own outcome is still sent.
func (e *Engine) WaitNotifications(ctx context.Context) bool {
	done := make(chan struct{})
	go func() {
		e.State.notifyQueue.pending.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// RedactWebhook is raw as logs, errors and status may show it: the scheme
// and host only, "https://hooks.example.com/…" (the path and query are
// where webhook tokens live); "[notify] webhook" when raw does not parse.
func RedactWebhook(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "[notify] webhook"
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		out += "/…"
	}
	return out
}

// RedactWebhookError is err's text with raw, its path and its query
// replaced by RedactWebhook(raw): a *url.Error names the full URL, and
// a transport error may quote parts of it.
func RedactWebhookError(raw string, err error) string {
	if err == nil {
		return ""
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	text := err.Error()
	red := RedactWebhook(raw)
	text = strings.ReplaceAll(text, raw, red)
	if u, perr := url.Parse(raw); perr == nil {
		for _, part := range []string{u.RawQuery, u.EscapedPath(), u.Path} {
			if len(part) > 1 {
				text = strings.ReplaceAll(text, part, "…")
			}
		}
	}
	return text
}
