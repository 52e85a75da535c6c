package dashboard

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func TestParseMetrics_ReadsRequestsErrorsAndBuckets(t *testing.T) {
	text := `# HELP gordon_edge_http_requests_total x
gordon_edge_http_requests_total{app="a",backend="10.0.0.2:80",code="2xx",service="web"} 90
gordon_edge_http_requests_total{app="a",backend="10.0.0.2:80",code="5xx",service="web"} 10
gordon_edge_http_request_duration_seconds_bucket{app="a",backend="10.0.0.2:80",service="web",le="0.01"} 50
gordon_edge_http_request_duration_seconds_bucket{app="a",backend="10.0.0.2:80",service="web",le="0.1"} 100
gordon_edge_http_request_duration_seconds_bucket{app="a",backend="10.0.0.2:80",service="web",le="+Inf"} 100
gordon_edge_http_requests_total{app="we\"ird",backend="b",code="2xx",service="s"} 1
gordon_edge_http_requests_total{app="broken 3
go_goroutines 12
`
	m := parseMetrics([]byte(text))
	c := m[backendKey{"a", "web", "10.0.0.2:80"}]
	require.NotNil(t, c)
	assert.Equal(t, 100.0, c.requests)
	assert.Equal(t, 10.0, c.errors)
	assert.InDelta(t, 10.0, quantile(0.5, c.buckets), 1e-9, "p50 at the 0.01 s bound")
	assert.InDelta(t, 98.2, quantile(0.99, c.buckets), 1e-9, "p99 interpolated in 0.01..0.1 s")
	assert.NotNil(t, m[backendKey{`we"ird`, "s", "b"}])
	assert.Len(t, m, 2)
	assert.Equal(t, 0.0, quantile(0.5, nil))
}

// TestRates_NameTheGenerationThatWasSwitchedAway: after a switch the old
// backend's figures stay under its revision beside the new one's, the new
// one marked serving.
func TestRates_NameTheGenerationThatWasSwitchedAway(t *testing.T) {
	var tr traffic
	t0 := time.Now()
	old := engine.AppStatus{App: "a", Services: []engine.ServiceStatus{{Service: "web", Revision: "rev-1", IP: "10.0.0.2", BackendBinds: map[int]int{80: 80}}}}
	tr.learn(t0, []engine.AppStatus{old})
	tr.add(t0, parseMetrics([]byte(metricsText("a", "10.0.0.2:80", 100, 0))))
	cur := engine.AppStatus{App: "a", Services: []engine.ServiceStatus{{Service: "web", Revision: "rev-2", IP: "10.0.0.3", BackendBinds: map[int]int{80: 80}}}}
	tr.learn(t0.Add(2*time.Second), []engine.AppStatus{cur})
	tr.add(t0.Add(2*time.Second), parseMetrics([]byte(metricsText("a", "10.0.0.2:80", 120, 0)+metricsText("a", "10.0.0.3:80", 40, 4))))
	rs := tr.rates("a", map[string]string{"web": "rev-2"})
	require.Len(t, rs, 2)
	assert.Equal(t, "rev-2", rs[0].Revision)
	assert.True(t, rs[0].Serving)
	assert.InDelta(t, 20.0, rs[0].RPS, 1e-9)
	assert.InDelta(t, 0.1, rs[0].ErrorRate, 1e-9)
	assert.Equal(t, "rev-1", rs[1].Revision)
	assert.False(t, rs[1].Serving)
	assert.InDelta(t, 10.0, rs[1].RPS, 1e-9)
	assert.Equal(t, []float64{10}, rs[1].Series)
	assert.Empty(t, tr.rates("other", nil))
}

// TestFeed_RemoteRoundTrip: what WriteFeed sends (a runner on a remote
// engine), ReadFeed publishes whole on the other side.
func TestFeed_RemoteRoundTrip(t *testing.T) {
	f := newFixture(t)
	f.seedApp("blog", 1)
	snap, err := f.collector().Collect(context.Background())
	require.NoError(t, err)
	src, dst := NewFeed(), NewFeed()
	src.Publish(snap)
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	wdone := make(chan error, 1)
	go func() { wdone <- WriteFeed(ctx, src, pw) }()
	rdone := make(chan error, 1)
	go func() { rdone <- ReadFeed(ctx, pr, dst) }()
	got, err := dst.Latest(ctx)
	require.NoError(t, err)
	require.Len(t, got.Apps, 1)
	assert.Equal(t, "blog", got.Apps[0].Status.App)
	assert.Equal(t, "op-blog-1", got.Apps[0].Ops[0].ID)
	assert.Equal(t, "migrated 3 tables", got.Apps[0].Ops[0].Steps[1].Diagnostics[0])
	cancel()
	require.NoError(t, <-wdone)
	_ = pw.Close()
	require.NoError(t, <-rdone)
}
