package dataplane

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// pick skips ejected backends and never returns an index out of range;
// with all of them ejected it still picks (round-robin).
func TestR21_PickSkipsEjected(t *testing.T) {
	rt := testRoute(3)
	ejectForAnHour(rt.Backends[1])
	for range 30 {
		assert.NotEqual(t, 1, rt.Pick())
	}
	for _, b := range rt.Backends {
		ejectForAnHour(b)
	}
	assert.Less(t, rt.Pick(), 3)
	assert.Equal(t, -1, rt.Other(0, time.Now().UnixNano()))
}

func testRoute(n int) *HTTPRoute {
	rt := &HTTPRoute{next: new(atomic.Uint64)}
	for range n {
		b := &Backend{}
		b.Health.Base, b.Health.Max = time.Second, time.Second
		rt.Backends = append(rt.Backends, b)
	}
	return rt
}

// ejectForAnHour ejects b for an hour (its bounds are left as they were).
func ejectForAnHour(b *Backend) {
	h := &b.Health
	base, maxd := h.Base, h.Max
	h.Base, h.Max = time.Hour, time.Hour
	h.Eject(time.Now().UnixNano(), upstream.EjectConnect)
	h.Base, h.Max = base, maxd
}

// BenchmarkR21_PickHealthy is pick over three admitted instances: the
// healthy case reads one atomic per request and allocates nothing.
func BenchmarkR21_PickHealthy(b *testing.B) {
	rt := testRoute(3)
	b.ReportAllocs()
	for b.Loop() {
		_ = rt.Pick()
	}
}

// BenchmarkR21_PickOneEjected is pick over three instances, one ejected.
func BenchmarkR21_PickOneEjected(b *testing.B) {
	rt := testRoute(3)
	ejectForAnHour(rt.Backends[1])
	b.ReportAllocs()
	for b.Loop() {
		_ = rt.Pick()
	}
}
