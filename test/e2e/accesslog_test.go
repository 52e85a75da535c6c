package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// TestAccessLog_LinePerRequestShownPerApp (R74): the edge,
// its access log going to a file, writes one line per request with the
// host and the status; `logs APP --access` shows that app's lines only
// and `edge logs --access` every line (the unknown host's 404 too).
func TestAccessLog_LinePerRequestShownPerApp(t *testing.T) {
	imgs := testimages.Require(t, "httpd")
	logFile := filepath.Join(t.TempDir(), "access.log")
	a := fixture.NewApp(t, "e2eaccess", fixture.WithEdge(fixture.EdgeConfig{Extra: []string{"--access-log", logFile}}))
	a.MustDeploy(fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "2s"
[[services.web.http]]
port = 8080
host = "access.test"
[services.web.readiness]
type = "http"
path = "/healthz"
`, a.Name, imgs["httpd"]))
	const n = 5
	for i := range n {
		code, _, err := a.Edge.Get("access.test", fmt.Sprintf("/item/%d", i))
		require.NoError(t, err)
		require.Equal(t, 200, code)
	}
	code, _, err := a.Edge.Get("unknown.test", "/")
	require.NoError(t, err)
	require.Equal(t, 404, code)

	type line struct {
		Host, Method, Path, App, Service, Instance, Protocol string
		Status                                               int
	}
	parse := func(out string) []line {
		var ls []line
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l == "" {
				continue
			}
			var x line
			require.NoError(t, json.Unmarshal([]byte(l), &x), l)
			ls = append(ls, x)
		}
		return ls
	}
	// The edge flushes its buffer every 500 ms: wait for the 404's line.
	var all []line
	require.Eventually(t, func() bool {
		r := a.Gordon("edge", "logs", "--access")
		if r.Code != 0 {
			return false
		}
		all = parse(r.Stdout)
		return len(all) > 0 && all[len(all)-1].Host == "unknown.test"
	}, 10*time.Second, 100*time.Millisecond, "edge logs --access never showed the 404")

	r := a.Gordon("logs", a.Name, "--access")
	require.Equal(t, 0, r.Code, r.String())
	mine := parse(r.Stdout)
	var paths []string
	for _, l := range mine {
		assert.Equal(t, a.Name, l.App)
		assert.Equal(t, "access.test", l.Host)
		assert.Equal(t, "web", l.Service)
		assert.NotEmpty(t, l.Instance)
		assert.Equal(t, "HTTP/1.1", l.Protocol)
		if strings.HasPrefix(l.Path, "/item/") { // the readiness probe goes direct, not through the edge
			assert.Equal(t, 200, l.Status)
			paths = append(paths, l.Path)
		}
	}
	assert.Equal(t, []string{"/item/0", "/item/1", "/item/2", "/item/3", "/item/4"}, paths)
	assert.Equal(t, 404, all[len(all)-1].Status)
}
