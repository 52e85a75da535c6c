package dataplane

import (
	"context"
	"sync"
	"time"
)

// FirstTable is what a request for a host no route matches waits for on
// a new edge task of a swarm: its state is a tmpfs, so it starts with no
// route table and serves its published port a moment before its peers'
// table (or the next push) reaches it. Measured on the swarm lab: 0.01
// to 0.61 s. Rather than a 404 for an app that exists, such a request
// waits until the first table is applied (Mark), at most until the
// bound given to NewFirstTable.
type FirstTable struct {
	done chan struct{}
	once sync.Once
	by   time.Time
}

// NewFirstTable returns a FirstTable whose waits end at the latest wait
// from now; wait <= 0 is one nothing waits for (an edge without peers:
// its table on disk is its own).
func NewFirstTable(wait time.Duration) *FirstTable {
	f := &FirstTable{done: make(chan struct{}), by: time.Now().Add(wait)}
	if wait <= 0 {
		f.Mark()
	}
	return f
}

// Mark records that a table is applied: every wait ends (idempotent).
func (f *FirstTable) Mark() { f.once.Do(func() { close(f.done) }) }

// Await waits, while no table was applied and the bound has not passed,
// until one is (true: look the route up again), the bound passes or ctx
// ends (false: answer as without a table). With a table applied it
// returns false at once.
func (f *FirstTable) Await(ctx context.Context) bool {
	select {
	case <-f.done:
		return false
	default:
	}
	left := time.Until(f.by)
	if left <= 0 {
		return false
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-f.done:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}
