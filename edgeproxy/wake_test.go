package edgeproxy_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

func asleepRoute(host string, ignore ...string) routetable.HTTPRoute {
	return routetable.HTTPRoute{Host: host, App: "app", Service: "web", Asleep: &routetable.Asleep{WakeTimeoutMS: 10_000, Ignore: ignore}}
}

// takeWakes long-polls the edge's GET /wakes once.
func takeWakes(t *testing.T, e *edge, wait string) []edgestate.WakeRequest {
	t.Helper()
	var out []edgestate.WakeRequest
	require.NoError(t, json.Unmarshal([]byte(adminGet(t, e, "/wakes?wait="+wait)), &out))
	return out
}

// R81 (wake on the first request): requests for a sleeping service are
// held, not refused; concurrent first requests ask the watcher once; once
// a table routes the service again, every held request goes there.
func TestR81_ConcurrentFirstRequestsAskOneWakeAndAreHeld(t *testing.T) {
	e := startEdge(t)
	a := nameBackend(t, "a")
	e.publish(t, httpTable(1, asleepRoute("app.test")))
	fresh := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var held []<-chan getResult
	for range 20 {
		held = append(held, getAsync(e.srv.HTTPAddr(), "app.test", fresh))
	}
	wakes := takeWakes(t, e, "10")
	require.Len(t, wakes, 1)
	assert.Equal(t, "app", wakes[0].App)
	assert.Equal(t, "web", wakes[0].Service)
	require.Eventually(t, func() bool { return strings.Contains(adminGet(t, e, "/metrics"), "gordon_edge_held_for_wake 20") },
		10*time.Second, 10*time.Millisecond, "20 requests held for the wake")
	e.publish(t, httpTable(2, route("app.test", addrOf(a))))
	for _, ch := range held {
		r := <-ch
		require.NoError(t, r.err)
		assert.Equal(t, http.StatusOK, r.code)
		assert.Equal(t, "a", r.body)
	}
	m := adminGet(t, e, "/metrics")
	assert.Contains(t, m, `gordon_edge_wakes_total{app="app",service="web"} 1`)
	assert.Contains(t, m, `gordon_edge_wake_duration_seconds_count{app="app",service="web"} 1`)
	assert.Empty(t, takeWakes(t, e, "0"), "the wake was taken once")

	// Asleep again: the next first request asks again.
	e.publish(t, httpTable(3, asleepRoute("app.test")))
	ch := getAsync(e.srv.HTTPAddr(), "app.test", fresh)
	require.Len(t, takeWakes(t, e, "10"), 1)
	e.publish(t, httpTable(4, route("app.test", addrOf(a))))
	require.Equal(t, http.StatusOK, (<-ch).code)
}

// R81 (what does not wake): a wake_ignore path is answered 503 with
// Retry-After and asks nothing; a wake the watcher never completes ends
// in 503 with Retry-After and a plain message at the route's bound.
func TestR81_IgnoredPathsDoNotWakeAndAnUnansweredWakeIs503(t *testing.T) {
	e := startEdge(t)
	r := asleepRoute("app.test", "/robots.txt", "/static/*")
	r.Asleep.WakeTimeoutMS = 300
	e.publish(t, httpTable(1, r))
	for _, p := range []string{"/robots.txt", "/static/x.css"} {
		resp, err := http.Get("http://" + e.srv.HTTPAddr() + p)
		require.NoError(t, err)
		resp.Body.Close()
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.srv.HTTPAddr()+p, nil)
		req.Host = "app.test"
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, p)
		assert.NotEmpty(t, resp.Header.Get("Retry-After"))
		resp.Body.Close()
	}
	assert.Empty(t, takeWakes(t, e, "0"), "ignored paths and unknown hosts ask no wake")
	got := <-getAsync(e.srv.HTTPAddr(), "app.test", http.DefaultClient)
	assert.Equal(t, http.StatusServiceUnavailable, got.code)
	assert.Equal(t, "5", got.retryAfter)
	assert.Contains(t, got.body, "did not wake up")
	assert.NotContains(t, strings.ToLower(got.body), "docker")
}

// R81 (activity): GET /activity reports when traffic last reached each
// routed service; a sleeping service is not listed.
func TestR81_StatusReportsActivityPerService(t *testing.T) {
	e := startEdge(t)
	a := nameBackend(t, "a")
	e.publish(t, httpTable(1, route("app.test", addrOf(a))))
	activity := func() []edgestate.ServiceActivity {
		var out []edgestate.ServiceActivity
		require.NoError(t, json.Unmarshal([]byte(adminGet(t, e, "/activity")), &out))
		return out
	}
	st := activity()
	require.Len(t, st, 1)
	first := st[0].Last
	assert.Equal(t, "web", st[0].Service)
	assert.Equal(t, first, activity()[0].Last, "no request: no activity")
	require.Equal(t, http.StatusOK, (<-getAsync(e.srv.HTTPAddr(), "app.test", http.DefaultClient)).code)
	assert.True(t, activity()[0].Last.After(first), "a request is activity")
	e.publish(t, httpTable(2, asleepRoute("app.test")))
	assert.Empty(t, activity())
}
