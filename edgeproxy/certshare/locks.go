package certshare

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"time"
)

// errStillHeld ends a lock wait that reached MaxWait; errTooManyLocks
// refuses a lock past MaxLocks.
var (
	errStillHeld    = errors.New("lock still held")
	errTooManyLocks = errors.New("too many locks held: ask again later")
)

// lockReply is the answer to POST /v1/lock.
type lockReply struct {
	Lease string `json:"lease"`
	TTLms int64  `json:"ttl_ms"`
}

// lockName returns the request's lock name (1 to 512 bytes), or answers
// 400 and returns false.
func lockName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.URL.Query().Get("name")
	if name == "" || len(name) > 512 {
		http.Error(w, "bad lock name", http.StatusBadRequest)
		return "", false
	}
	return name, true
}

func (s *Server) serveLock(w http.ResponseWriter, r *http.Request) {
	name, ok := lockName(w, r)
	if !ok {
		return
	}
	id, err := s.acquire(r.Context(), name)
	switch {
	case errors.Is(err, errStillHeld):
		http.Error(w, "lock held by another client: ask again", http.StatusConflict)
	case errors.Is(err, errTooManyLocks):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case err != nil:
		// The client went away (its context ended): nobody reads this.
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		writeJSON(w, lockReply{Lease: id, TTLms: s.LeaseTTL.Milliseconds()})
	}
}

func (s *Server) serveRenew(w http.ResponseWriter, r *http.Request) {
	name, ok := lockName(w, r)
	if !ok {
		return
	}
	if !s.renew(name, r.URL.Query().Get("lease")) {
		http.Error(w, "lease lost: not held by this lease (expired or released)", http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) serveUnlock(w http.ResponseWriter, r *http.Request) {
	name, ok := lockName(w, r)
	if !ok {
		return
	}
	if !s.release(name, r.URL.Query().Get("lease")) {
		http.Error(w, "lease lost: not held by this lease (expired or released)", http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// acquire waits until lock name is free (never held, released, or its
// lease lapsed) and takes it, returning the new lease's id; errStillHeld
// after MaxWait, ctx's error when ctx ends first.
func (s *Server) acquire(ctx context.Context, name string) (string, error) {
	deadline := time.NewTimer(s.MaxWait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		s.sweepLocked(now)
		l := s.locks[name]
		if l != nil && now.After(l.expires) {
			s.dropLocked(name, l) // its holder stopped renewing
			l = nil
		}
		if l == nil && len(s.locks) >= s.MaxLocks {
			s.mu.Unlock()
			return "", errTooManyLocks
		}
		if l == nil {
			id := newLeaseID()
			s.locks[name] = &lease{id: id, expires: now.Add(s.LeaseTTL), released: make(chan struct{})}
			s.mu.Unlock()
			return id, nil
		}
		released, lapse := l.released, time.Until(l.expires)+time.Millisecond
		s.mu.Unlock()
		t := time.NewTimer(lapse)
		select {
		case <-released:
		case <-t.C:
		case <-deadline.C:
			t.Stop()
			return "", errStillHeld
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		}
		t.Stop()
	}
}

// renew extends lease id of lock name by LeaseTTL; false when id does not
// hold it (a lapsed lease is released here).
func (s *Server) renew(name, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.locks[name]
	if l == nil || l.id != id {
		return false
	}
	now := time.Now()
	if now.After(l.expires) {
		s.dropLocked(name, l)
		return false
	}
	l.expires = now.Add(s.LeaseTTL)
	return true
}

// release frees lock name held by lease id; false when id does not hold
// it.
func (s *Server) release(name, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.locks[name]
	if l == nil || l.id != id {
		return false
	}
	expired := time.Now().After(l.expires)
	s.dropLocked(name, l)
	return !expired
}

// dropLocked, under s.mu, forgets l and wakes its waiters.
func (s *Server) dropLocked(name string, l *lease) {
	delete(s.locks, name)
	close(l.released)
}

func newLeaseID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
