package edgeproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// R62 (HSTS per interface): a route with hsts answers every HTTPS request
// with that Strict-Transport-Security value in place of the backend's, on
// each HTTPS path (the h1 loop, the HTTP/2 fast path, ServeHTTP); plain
// HTTP and routes without hsts pass the backend's header as it is.
func TestR62_HSTSOnHTTPSAnswersOfTheRoute(t *testing.T) {
	b := nameBackendWithSTS(t)
	ca := newTestCA(t)
	e := startTLSEdge(t, "")
	for _, h := range []string{"hsts.test", "plain.test"} {
		c, k := ca.valid(t, h)
		_, err := certstore.AddStatic(e.stateDir, h, c, k, time.Now())
		require.NoError(t, err)
	}
	withHSTS := tlsRoute("hsts.test", "", addrOf(b))
	withHSTS.HSTS = "max-age=63072000; includeSubDomains"
	e.publish(t, httpTable(1, withHSTS, tlsRoute("plain.test", "never", addrOf(b))))
	waitServed(t, e, "hsts.test", ca.pool)
	for _, h2 := range []bool{false, true} {
		c := httpsClient(e, ca.pool, h2)
		for _, method := range []string{"GET", "POST"} {
			var body io.Reader
			if method == "POST" {
				body = strings.NewReader("x")
			}
			req, _ := http.NewRequest(method, "https://hsts.test/", body)
			resp, err := c.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			assert.Equal(t, []string{"max-age=63072000; includeSubDomains"}, resp.Header.Values("Strict-Transport-Security"), "h2 %v %s", h2, method)
		}
	}
	req, _ := http.NewRequest("GET", "http://"+e.srv.HTTPAddr()+"/", nil)
	req.Host = "plain.test"
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []string{"max-age=1"}, resp.Header.Values("Strict-Transport-Security"), "plain HTTP: the backend's header only")
}

// nameBackendWithSTS answers "ok" with its own Strict-Transport-Security.
func nameBackendWithSTS(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Strict-Transport-Security", "max-age=1")
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}
