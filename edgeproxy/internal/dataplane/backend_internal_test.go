package dataplane

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Decision 16: a backend no snapshot references stays registered (with its
// counters) until it has been idle and unreferenced for backendIdleEviction.
func TestDecision16_RegistryKeepsBusyAndRecentBackends(t *testing.T) {
	reg := NewRegistry(time.Second, nil, nil)
	busy := reg.Get("127.0.0.1:1")
	reg.Get("127.0.0.1:2")
	busy.InFlight.Add(1)
	now := time.Now()
	reg.Retain(map[string]struct{}{}, now)
	assert.Len(t, reg.Status(), 2, "just unreferenced: kept")
	reg.Retain(map[string]struct{}{}, now.Add(backendIdleEviction))
	st := reg.Status()
	assert.Len(t, st, 1, "idle one evicted, busy one kept")
	assert.Equal(t, "127.0.0.1:1", st[0].Addr)
	assert.Equal(t, int64(1), st[0].InFlight)
	assert.Same(t, busy, reg.Get("127.0.0.1:1"), "the same counters are carried when the address returns")
}
