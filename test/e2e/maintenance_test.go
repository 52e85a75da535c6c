package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// TestR75_MaintenanceThroughTheEdge: a deployed app put in maintenance
// answers 503 with the message and Retry-After (JSON when asked for) while
// its container keeps running; a client in --allow (127.0.0.1) is proxied,
// without --allow it gets 503 too; the mode survives an edge restart
// (the new edge serves it from the published route table); maintenance
// off serves the app again.
func TestR75_MaintenanceThroughTheEdge(t *testing.T) {
	imgs := testimages.Require(t, "httpd")
	a := fixture.NewApp(t, "e2eh27maint")
	a.MustDeploy(fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "2s"
[[services.web.http]]
port = 8080
host = "maint.h27.test"
[services.web.readiness]
type = "http"
path = "/healthz"
`, a.Name, imgs["httpd"]))
	running := fixture.Running(a.Name, "web")
	require.Len(t, running, 1)
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
	get := func(accept string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+a.Edge.HTTPAddr+"/version", nil)
		req.Host = "maint.h27.test"
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	gordon := func(args ...string) {
		t.Helper()
		r := a.Gordon(args...)
		require.Equal(t, 0, r.Code, "%v: %s", args, r)
	}
	code, _, _ := get("")
	require.Equal(t, http.StatusOK, code)

	gordon("maintenance", "on", a.Name, "--message", "Upgrading <db>, back at 14:00")
	code, h, body := get("text/html")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "30", h.Get("Retry-After"))
	assert.Equal(t, "no-store", h.Get("Cache-Control"))
	assert.Contains(t, body, "Upgrading &lt;db&gt;, back at 14:00")
	code, _, body = get("application/json")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.JSONEq(t, `{"error":"maintenance","message":"Upgrading <db>, back at 14:00"}`, body)
	assert.Equal(t, running, fixture.Running(a.Name, "web"), "the container keeps running")
	r := a.Gordon("maintenance", "status", a.Name, "--format", "json")
	require.Equal(t, 0, r.Code, "%s", r)
	var st struct {
		On      bool
		Message string
		Op      string
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &st), r.Stdout)
	assert.True(t, st.On)
	assert.Equal(t, "Upgrading <db>, back at 14:00", st.Message)
	assert.NotEmpty(t, st.Op)

	gordon("maintenance", "on", a.Name, "--allow", "127.0.0.1/32")
	code, _, _ = get("")
	assert.Equal(t, http.StatusOK, code, "127.0.0.1 is in the allow list")

	gordon("maintenance", "on", a.Name, "--message", "down")
	code, _, _ = get("")
	assert.Equal(t, http.StatusServiceUnavailable, code, "without --allow every client gets 503")

	// An edge restart: a new edge process on the same address serves the
	// published table, maintenance included.
	a.Edge.Stop()
	a.Edge = fixture.StartEdgeWith(t, a.State, fixture.EdgeConfig{HTTPAddr: a.Edge.HTTPAddr})
	var last int
	require.Eventually(t, func() bool {
		last, _, body = get("")
		return last == http.StatusServiceUnavailable
	}, 10*time.Second, 50*time.Millisecond, "after an edge restart: last status %d", last)
	assert.Contains(t, body, "down")

	gordon("maintenance", "off", a.Name)
	code, _, _ = get("")
	assert.Equal(t, http.StatusOK, code, "maintenance off serves the app again")
	assert.Equal(t, running, fixture.Running(a.Name, "web"), "the same container serves")
	r = a.Gordon("ops", a.Name, "--format", "json")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, `"kind": "maintenance"`)
}
