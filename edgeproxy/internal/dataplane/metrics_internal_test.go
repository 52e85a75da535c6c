package dataplane

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Metrics children of a backend are dropped when the
// registry evicts it.
func TestEvictedBackendSeriesForgotten(t *testing.T) {
	m := NewMetrics()
	reg := NewRegistry(time.Second, nil, nil)
	reg.Metrics = m
	reg.Get("127.0.0.1:1")
	m.forRoute("app", "web", "127.0.0.1:1").byClass[2].Inc()
	count := func() int {
		mfs, err := m.Reg.Gather()
		require.NoError(t, err)
		n := 0
		for _, mf := range mfs {
			if mf.GetName() == "gordon_edge_http_requests_total" {
				n += len(mf.GetMetric())
			}
		}
		return n
	}
	require.Positive(t, count())
	now := time.Now()
	reg.Retain(map[string]struct{}{}, now)
	reg.Retain(map[string]struct{}{}, now.Add(backendIdleEviction))
	assert.Zero(t, count())
}
