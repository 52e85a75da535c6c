package edgeproxy

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The ejection bound starts at base, doubles on each ejection that follows
// within max of the previous one's end, is capped at max, and starts over
// after a quiet period longer than max.
func TestR21_EjectionBoundDoublesUpToTheCap(t *testing.T) {
	h := health{base: 10 * time.Second, max: 80 * time.Second}
	now := time.Now().UnixNano()
	var got []time.Duration
	for range 5 {
		until := h.eject(now, ejectConnect)
		got = append(got, time.Duration(until-now))
		assert.True(t, h.ejected(until-1))
		assert.False(t, h.ejected(until), "readmitted at the bound")
		now = until + int64(time.Second)
	}
	assert.Equal(t, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 80 * time.Second}, got)
	now += int64(81 * time.Second)
	assert.Equal(t, 10*time.Second, time.Duration(h.eject(now, ejectReset)-now), "a quiet period resets the bound")
	assert.Equal(t, ejectReset, *h.reason.Load())
}

// pick skips ejected backends and never returns an index out of range;
// with all of them ejected it still picks (round-robin).
func TestR21_PickSkipsEjected(t *testing.T) {
	rt := testRoute(3)
	rt.backends[1].health.until.Store(time.Now().Add(time.Hour).UnixNano())
	for range 30 {
		assert.NotEqual(t, 1, rt.pick())
	}
	for _, b := range rt.backends {
		b.health.until.Store(time.Now().Add(time.Hour).UnixNano())
	}
	assert.Less(t, rt.pick(), 3)
	assert.Equal(t, -1, rt.other(0, time.Now().UnixNano()))
}

func testRoute(n int) *httpRoute {
	rt := &httpRoute{next: new(atomic.Uint64)}
	for range n {
		b := &backend{}
		b.health.base, b.health.max = time.Second, time.Second
		rt.backends = append(rt.backends, b)
	}
	return rt
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
	rt.backends[1].health.until.Store(time.Now().Add(time.Hour).UnixNano())
	b.ReportAllocs()
	for b.Loop() {
		_ = rt.pick()
	}
}
