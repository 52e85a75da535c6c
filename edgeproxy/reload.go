package edgeproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// reloadAnswerWait bounds how long POST /reload waits for the route table
// read it asked for before it answers 202 (queued) instead of the outcome.
const reloadAnswerWait = 2 * time.Second

// reloadWaiters are the POST /reload requests waiting for the route table
// read that follows them. A read takes the waiters registered before it
// starts (take) and releases them when it is done, so a waiter never sees
// the outcome of a read that may have missed the table its caller wrote.
type reloadWaiters struct {
	mu      sync.Mutex
	waiting []chan struct{}
}

// add registers a waiter; the channel is closed after the next read.
func (w *reloadWaiters) add() chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiting = append(w.waiting, ch)
	w.mu.Unlock()
	return ch
}

// take returns and forgets the waiters registered so far.
func (w *reloadWaiters) take() []chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	chs := w.waiting
	w.waiting = nil
	return chs
}

// pollReload is the route table read asked for by Reload: a forced read,
// then the waiters registered before it are released.
func (s *Server) pollReload(w *watcher) {
	waiters := s.reloaded.take()
	w.force = true
	s.poll(w, false)
	for _, ch := range waiters {
		close(ch)
	}
}

// serveReload is admin POST /reload: it asks for the route table to be read
// now and answers, once that read is done, 200 with the status after it
// (routetable.Status as JSON: applied_generation, or error and
// rejected_generation for a rejected table, listeners, state_id). When the
// read does not finish within reloadAnswerWait (or the caller gives up)
// or this edge handed its listeners over, the answer is 202: queued, the
// outcome shows in status.json as for any apply.
func (s *Server) serveReload(w http.ResponseWriter, r *http.Request) {
	if !s.awaitReload(r.Context()) {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Status())
}

// awaitReload asks for the route table to be read now and reports whether
// that read is done (true) or not within reloadAnswerWait, before ctx
// ended, or because this edge handed its listeners over (false).
func (s *Server) awaitReload(ctx context.Context) bool {
	done := s.reloaded.add()
	s.Reload()
	t := time.NewTimer(reloadAnswerWait)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	case <-s.handedOver:
		// The next edge serves now; this one reads no more tables.
	case <-ctx.Done():
	}
	return false
}
