package edgeproxy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
)

func wildTable(gen uint64, hosts ...string) routetable.Table {
	t := routetable.Table{Schema: routetable.Schema, Generation: gen}
	for i, h := range hosts {
		t.HTTP = append(t.HTTP, routetable.HTTPRoute{Host: h, App: "app", Service: h,
			Backends: []routetable.Backend{{Addr: "127.0.0.1:" + string(rune('1'+i)) + "000"}}})
	}
	return t
}

// cached returns the host cache entry for host after pending sets landed.
func cached(s *Server, host string) (dataplane.HostEntry, bool) {
	s.Hosts.Wait()
	return s.Hosts.Get(host)
}

// Wildcard resolutions and unknown hosts are cached in the
// bounded ristretto cache; a new generation clears it, so a host unknown
// before resolves to a route added by the new table.
func TestHostCacheWildcardAndNegativeClearedOnNewGeneration(t *testing.T) {
	s := New(Config{})
	require.NotNil(t, s.Hosts)
	assert.Equal(t, int64(hostCacheEntries), s.Hosts.MaxCost(), "the cache is bounded")
	require.NoError(t, s.Apply(wildTable(1, "exact.test", "*.example.com")))
	snap := s.Snap.Load()

	r := s.Route(snap, "A.Example.com:8080")
	require.NotNil(t, r)
	assert.Equal(t, "*.example.com", r.Host)
	e, ok := cached(s, "a.example.com")
	require.True(t, ok, "wildcard resolution cached")
	assert.Equal(t, uint64(1), e.Gen)
	assert.Same(t, r, e.Route)
	// The cached entry is what answers next time.
	assert.Same(t, r, s.Route(snap, "a.example.com"))

	assert.Nil(t, s.Route(snap, "x.other.test"))
	e, ok = cached(s, "x.other.test")
	require.True(t, ok, "negative lookup cached")
	assert.Nil(t, e.Route)

	assert.NotNil(t, s.Route(snap, "exact.test"))
	_, ok = cached(s, "exact.test")
	assert.False(t, ok, "exact hosts are answered by the map, not cached")

	require.NoError(t, s.Apply(wildTable(2, "exact.test", "*.example.com", "*.other.test")))
	_, ok = cached(s, "x.other.test")
	assert.False(t, ok, "cache cleared on the new generation")
	r = s.Route(s.Snap.Load(), "x.other.test")
	require.NotNil(t, r)
	assert.Equal(t, "*.other.test", r.Host)
}

// An entry of an older generation is never served even if
// it slipped into the cache after the clear.
func TestHostCacheStaleGenerationIsAMiss(t *testing.T) {
	s := New(Config{})
	require.NoError(t, s.Apply(wildTable(1, "*.example.com")))
	old := s.Snap.Load()
	require.NoError(t, s.Apply(wildTable(2, "*.example.com", "*.other.test")))
	// A request still holding the old snapshot caches a negative answer.
	assert.Nil(t, s.Route(old, "x.other.test"))
	s.Hosts.Wait()
	r := s.Route(s.Snap.Load(), "x.other.test")
	require.NotNil(t, r, "stale negative entry must not hide the new route")
	assert.Equal(t, "*.other.test", r.Host)
}

// The host cache is cleared at each apply while requests
// resolve wildcard and unknown hosts concurrently (run with -race); every
// answer matches the snapshot the resolution ran on.
func TestHostCacheConcurrentApplyAndLookups(t *testing.T) {
	s := New(Config{})
	require.NoError(t, s.Apply(wildTable(1, "*.example.com")))
	done := make(chan struct{})
	errs := make(chan string, 4)
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				snap := s.Snap.Load()
				host := "h" + string(rune('a'+(i+w)%26)) + ".other.test"
				r := s.Route(snap, host)
				hasOther := len(snap.Wildcards) == 2
				if (r != nil) != hasOther {
					errs <- "generation " + string(rune('0'+snap.Generation%10)) + " answered " + host + " wrongly"
					return
				}
				_ = s.Route(snap, "x.example.com")
			}
		}()
	}
	for gen := uint64(2); gen < 40; gen++ {
		hosts := []string{"*.example.com"}
		if gen%2 == 0 {
			hosts = append(hosts, "*.other.test")
		}
		require.NoError(t, s.Apply(wildTable(gen, hosts...)))
		// Pacing, not a wait: it spreads the swaps over the readers.
		time.Sleep(time.Millisecond)
	}
	close(done)
	for range 4 {
		assert.Empty(t, <-errs)
	}
}
