package l4

import (
	"sync"
	"sync/atomic"
	"time"
)

// fakeBackend is a Backend with the edge's counters and an ejection end.
type fakeBackend struct {
	addr            string
	open, inFlight  atomic.Int64
	ejectedUntil    atomic.Int64
	connectFailures atomic.Int64
}

func (b *fakeBackend) Addr() string            { return b.addr }
func (b *fakeBackend) Ejected(now int64) bool  { return b.ejectedUntil.Load() > now }
func (b *fakeBackend) AddOpen(delta int64)     { b.open.Add(delta) }
func (b *fakeBackend) AddInFlight(delta int64) { b.inFlight.Add(delta) }

// fakeBackends is a registry of fakeBackends, one per address.
type fakeBackends struct {
	mu       sync.Mutex
	backends map[string]*fakeBackend
	retried  atomic.Int64
}

func newFakeBackends() *fakeBackends {
	return &fakeBackends{backends: map[string]*fakeBackend{}}
}

func (r *fakeBackends) Get(addr string) Backend {
	return r.get(addr)
}

func (r *fakeBackends) get(addr string) *fakeBackend {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.backends[addr]
	if b == nil {
		b = &fakeBackend{addr: addr}
		r.backends[addr] = b
	}
	return b
}

// ConnectFailed counts the failure and ejects b for a minute.
func (r *fakeBackends) ConnectFailed(b Backend, _ string) {
	fb := b.(*fakeBackend)
	fb.connectFailures.Add(1)
	fb.ejectedUntil.Store(time.Now().Add(time.Minute).UnixNano())
}

func (r *fakeBackends) Retried(Backend) { r.retried.Add(1) }
