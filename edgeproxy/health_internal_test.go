package edgeproxy

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
	ejectForAnHour(rt.backends[1])
	for range 30 {
		assert.NotEqual(t, 1, rt.pick())
	}
	for _, b := range rt.backends {
		ejectForAnHour(b)
	}
	assert.Less(t, rt.pick(), 3)
	assert.Equal(t, -1, rt.other(0, time.Now().UnixNano()))
}

func testRoute(n int) *httpRoute {
	rt := &httpRoute{next: new(atomic.Uint64)}
	for range n {
		b := &backend{}
		b.health.Base, b.health.Max = time.Second, time.Second
		rt.backends = append(rt.backends, b)
	}
	return rt
}

// ejectForAnHour ejects b for an hour (its bounds are left as they were).
func ejectForAnHour(b *backend) {
	h := &b.health
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
		_ = rt.pick()
	}
}

// BenchmarkR21_PickOneEjected is pick over three instances, one ejected.
func BenchmarkR21_PickOneEjected(b *testing.B) {
	rt := testRoute(3)
	ejectForAnHour(rt.backends[1])
	b.ReportAllocs()
	for b.Loop() {
		_ = rt.pick()
	}
}
