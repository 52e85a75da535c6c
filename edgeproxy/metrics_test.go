package edgeproxy_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// /metrics on the admin address counts requests by route,
// backend and status class, edge-generated errors, unrouted requests, and
// reports the applied generation and in-flight requests.
func TestMetricsEndpointCountsByRouteBackendAndClass(t *testing.T) {
	e := startEdge(t)
	a := nameBackend(t, "a")
	refused := freePort(t)
	e.publish(t, httpTable(3, route("app.test", addrOf(a)), route("down.test", refused)))
	for range 3 {
		code, _ := e.get(t, "app.test", "/")
		require.Equal(t, http.StatusOK, code)
	}
	code, _ := e.get(t, "down.test", "/")
	require.Equal(t, http.StatusServiceUnavailable, code)
	code, _ = e.get(t, "nope.test", "/")
	require.Equal(t, http.StatusNotFound, code)

	resp, err := http.Get("http://" + e.srv.AdminAddr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	text := string(b)
	lbl := func(app, backend string) string {
		return fmt.Sprintf(`app=%q,backend=%q`, app, backend)
	}
	assert.Contains(t, text, `gordon_edge_http_requests_total{`+lbl("app", addrOf(a))+`,code="2xx",service="web"} 3`)
	assert.Contains(t, text, `gordon_edge_http_requests_total{`+lbl("app", refused)+`,code="5xx",service="web"} 1`)
	assert.Contains(t, text, `gordon_edge_http_proxy_errors_total{`+lbl("app", refused)+`,service="web",status="503"} 1`)
	assert.Contains(t, text, `gordon_edge_http_request_duration_seconds_count{`+lbl("app", addrOf(a))+`,service="web"} 3`)
	assert.Contains(t, text, `gordon_edge_http_in_flight_requests{`+lbl("app", addrOf(a))+`,service="web"} 0`)
	assert.Contains(t, text, "gordon_edge_http_unrouted_requests_total 1")
	assert.Contains(t, text, "gordon_edge_applied_generation 3")
}

// R76: the admin status reports each backend's cumulative request count and
// its errors: 5xx answers of the backend and the edge's own proxy errors.
func TestR76_StatusCountsRequestsAndErrorsPerBackend(t *testing.T) {
	e := startEdge(t)
	ok := nameBackend(t, "ok")
	bad := nameBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	refused := freePort(t)
	e.publish(t, httpTable(2, route("ok.test", addrOf(ok)), route("bad.test", bad), route("down.test", refused)))
	for range 4 {
		code, _ := e.get(t, "ok.test", "/")
		require.Equal(t, http.StatusOK, code)
	}
	for _, p := range []string{"/", "/fail", "/fail"} {
		_, _ = e.get(t, "bad.test", p)
	}
	code, _ := e.get(t, "down.test", "/")
	require.Equal(t, http.StatusServiceUnavailable, code)

	counts := map[string][2]int64{}
	for _, b := range adminStatus(t, e).Backends {
		counts[b.Addr] = [2]int64{b.Requests, b.Errors}
	}
	assert.Equal(t, [2]int64{4, 0}, counts[addrOf(ok)])
	assert.Equal(t, [2]int64{3, 2}, counts[bad])
	assert.Equal(t, [2]int64{1, 1}, counts[refused])
}
