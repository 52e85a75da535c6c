package edgeproxy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/access"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// maintGet sends GET url with Host host and the given Accept through c.
func maintGet(t *testing.T, c *http.Client, url, host, accept string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Host = host
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// checkMaintenance503 checks one maintenance answer for host with message.
func checkMaintenance503(t *testing.T, name string, c *http.Client, url, host, message string) {
	t.Helper()
	code, h, body := maintGet(t, c, url, host, "text/html,application/xhtml+xml,*/*;q=0.8")
	assert.Equal(t, http.StatusServiceUnavailable, code, name)
	assert.Equal(t, "30", h.Get("Retry-After"), name)
	assert.Equal(t, "no-store", h.Get("Cache-Control"), name)
	assert.Equal(t, "text/html; charset=utf-8", h.Get("Content-Type"), name)
	assert.Contains(t, body, "<p>"+html.EscapeString(message)+"</p>", name)
	assert.NotContains(t, body, "backend", name)
	code, h, body = maintGet(t, c, url, host, "application/json")
	assert.Equal(t, http.StatusServiceUnavailable, code, name)
	assert.Equal(t, "application/json", h.Get("Content-Type"), name)
	assert.Equal(t, "30", h.Get("Retry-After"), name)
	var doc struct{ Error, Message string }
	require.NoError(t, json.Unmarshal([]byte(body), &doc), "%s: %q", name, body)
	assert.Equal(t, "maintenance", doc.Error, name)
	assert.Equal(t, message, doc.Message, name)
}

// R75: on every HTTP path (plain HTTP through the event loop and the
// goroutine loop; HTTPS over HTTP/1.1 and HTTP/2) a route in maintenance
// answers 503 with Retry-After: 30, Cache-Control: no-store and the
// message as escaped HTML, or as JSON when Accept prefers it; a client in
// the maintenance allow list is proxied; another app's host is untouched.
func TestR75_MaintenanceAnswers503OnEveryPath(t *testing.T) {
	be := authEchoBackend(t)
	msg := "Back at 5 <b>pm</b> & later"
	maint := func(r routetable.HTTPRoute, allow ...string) routetable.HTTPRoute {
		r.Maintenance = &routetable.Maintenance{Message: msg, Allow: allow}
		return r
	}
	for _, loops := range []int{1, -1} {
		e := startEdge(t, func(c *edgeproxy.Config) { c.EventLoops = loops })
		e.publish(t, httpTable(1, maint(route("down.test", addrOf(be))), maint(route("staff.test", addrOf(be)), "127.0.0.1/32"),
			route("open.test", addrOf(be))))
		name := fmt.Sprintf("plain loops=%d", loops)
		url := "http://" + e.srv.HTTPAddr() + "/"
		checkMaintenance503(t, name, e.client, url, "down.test", msg)
		code, _, body := maintGet(t, e.client, url, "staff.test", "")
		assert.Equal(t, http.StatusOK, code, "%s: an allowed client is proxied", name)
		assert.Equal(t, "auth=", body, name)
		code, _, _ = maintGet(t, e.client, url, "open.test", "")
		assert.Equal(t, http.StatusOK, code, "%s: a host not in maintenance is untouched", name)
		// Repeated on one keep-alive connection: the loop never serves it.
		for i := 0; i < 3; i++ {
			code, _, _ = maintGet(t, e.client, url, "down.test", "")
			assert.Equal(t, http.StatusServiceUnavailable, code, name)
		}
	}
	ca := newTestCA(t)
	e := startTLSEdge(t, "")
	c, k := ca.valid(t, "down.test")
	_, err := certstore.AddStatic(e.stateDir, "down.test", c, k, time.Now())
	require.NoError(t, err)
	c, k = ca.valid(t, "staff.test")
	_, err = certstore.AddStatic(e.stateDir, "staff.test", c, k, time.Now())
	require.NoError(t, err)
	e.publish(t, httpTable(1, tlsRoute("staff.test", "always", addrOf(be))))
	waitServed(t, e, "staff.test", ca.pool)
	e.publish(t, httpTable(2, maint(tlsRoute("down.test", "always", addrOf(be))), maint(tlsRoute("staff.test", "always", addrOf(be)), "127.0.0.0/8")))
	for _, h2 := range []bool{false, true} {
		name := fmt.Sprintf("https h2=%v", h2)
		hc := httpsClient(e, ca.pool, h2)
		checkMaintenance503(t, name, hc, "https://down.test/", "down.test", msg)
		code, _, _ := maintGet(t, hc, "https://staff.test/", "staff.test", "")
		assert.Equal(t, http.StatusOK, code, "%s: an allowed client is proxied", name)
	}
}

// R75: the allow list is checked on the client address after trusted
// proxies; an untrusted peer cannot claim an address. Without a message
// the edge's default message is shown. A route that is both in
// maintenance and stopped answers the maintenance page.
func TestR75_MaintenanceAllowAfterTrustedProxiesAndDefaultMessage(t *testing.T) {
	be := authEchoBackend(t)
	r := route("down.test", addrOf(be))
	r.Maintenance = &routetable.Maintenance{Allow: []string{"10.0.0.0/8"}}
	stopped := routetable.HTTPRoute{Host: "stopped.test", App: "a", Service: "web", Stopped: true, Maintenance: &routetable.Maintenance{Message: "soon"}}
	e := startEdge(t, func(c *edgeproxy.Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	e.publish(t, httpTable(1, r, stopped))
	url := "http://" + e.srv.HTTPAddr() + "/"
	checkMaintenance503(t, "default message", e.client, url, "down.test", edgeproxy.DefaultMaintenanceMessage)
	code, _ := e.get(t, "down.test", "/", "X-Forwarded-For", "10.1.2.3")
	assert.Equal(t, http.StatusOK, code, "forwarded by a trusted proxy from an allowed address")
	code, _ = e.get(t, "down.test", "/", "X-Forwarded-For", "10.1.2.3, 203.0.113.9")
	assert.Equal(t, http.StatusServiceUnavailable, code, "the right-most untrusted hop decides")
	checkMaintenance503(t, "stopped", e.client, url, "stopped.test", "soon")

	e2 := startEdge(t)
	e2.publish(t, httpTable(1, r))
	code, _ = e2.get(t, "down.test", "/", "X-Forwarded-For", "10.1.2.3")
	assert.Equal(t, http.StatusServiceUnavailable, code, "an untrusted peer cannot claim an allowed address")
}

// R75: Accept decides HTML or JSON by quality, the most specific range
// first; no Accept is HTML.
func TestR75_MaintenanceAcceptNegotiation(t *testing.T) {
	be := authEchoBackend(t)
	r := route("down.test", addrOf(be))
	r.Maintenance = &routetable.Maintenance{Message: "m"}
	e := startEdge(t)
	e.publish(t, httpTable(1, r))
	url := "http://" + e.srv.HTTPAddr() + "/"
	for accept, want := range map[string]string{
		"":                                   "text/html; charset=utf-8",
		"*/*":                                "text/html; charset=utf-8",
		"application/json":                   "application/json",
		"application/json, text/plain":       "application/json",
		"text/html, application/json;q=0.9":  "text/html; charset=utf-8",
		"text/html;q=0.5, application/json":  "application/json",
		"application/*":                      "application/json",
		"application/json;q=0, */*":          "text/html; charset=utf-8",
		"text/*;q=0.1, application/json;q=1": "application/json",
	} {
		code, h, _ := maintGet(t, e.client, url, "down.test", accept)
		assert.Equal(t, http.StatusServiceUnavailable, code)
		assert.Equal(t, want, h.Get("Content-Type"), "Accept %q", accept)
	}
}

// R75: a route table whose maintenance allow entry is not a CIDR, or
// whose message is too long, is rejected.
func TestR75_TableRejectsBadMaintenance(t *testing.T) {
	for name, m := range map[string]*routetable.Maintenance{
		"bad cidr":     {Allow: []string{"10.0.0.0/33"}},
		"long message": {Message: strings.Repeat("x", access.MaxMaintenanceMessage+1)},
	} {
		r := route("a.test", "127.0.0.1:1")
		r.Maintenance = m
		_, err := edgeproxy.LoadTable(mustJSON(t, httpTable(1, r)))
		require.Error(t, err, name)
		assert.True(t, errors.Is(err, edgeproxy.ErrInvalidTable), name)
		assert.Contains(t, err.Error(), "maintenance", name)
	}
}
