package e2e

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// TestR73_BasicAuthAndAllowlistThroughTheEdge: a deployed app's public
// interfaces with basic_auth and allow, served by the real edge: 401 with
// WWW-Authenticate without credentials and with a wrong password, 200
// with the right ones; a client (127.0.0.1) inside the allowlist passes,
// one outside it gets 403 even with the right credentials.
func TestR73_BasicAuthAndAllowlistThroughTheEdge(t *testing.T) {
	imgs := testimages.Require(t, "httpd")
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.DefaultCost)
	require.NoError(t, err)
	a := fixture.NewApp(t, "e2eauth")
	a.MustDeploy(fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "2s"
[[services.web.http]]
port = 8080
host = "in.auth.test"
basic_auth = ['alice:%s']
allow = ["127.0.0.0/8", "::1"]
[[services.web.http]]
port = 8080
host = "out.auth.test"
basic_auth = ['alice:%s']
allow = ["10.0.0.0/8"]
[[services.web.http]]
port = 8080
host = "open.auth.test"
allow = ["127.0.0.1"]
[services.web.readiness]
type = "http"
path = "/healthz"
`, a.Name, imgs["httpd"], hash, hash))
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
	get := func(host, user, pass string) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+a.Edge.HTTPAddr+"/version", nil)
		req.Host = host
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header
	}
	code, h := get("in.auth.test", "", "")
	assert.Equal(t, http.StatusUnauthorized, code, "no credentials")
	assert.Equal(t, `Basic realm="in.auth.test", charset="UTF-8"`, h.Get("WWW-Authenticate"))
	code, _ = get("in.auth.test", "alice", "wrong")
	assert.Equal(t, http.StatusUnauthorized, code, "wrong password")
	for range 3 { // the first verifies, the next come from the cache
		code, _ = get("in.auth.test", "alice", "s3cret")
		assert.Equal(t, http.StatusOK, code, "right credentials, inside the allowlist")
	}
	code, _ = get("out.auth.test", "alice", "s3cret")
	assert.Equal(t, http.StatusForbidden, code, "127.0.0.1 is outside 10.0.0.0/8")
	code, _ = get("out.auth.test", "", "")
	assert.Equal(t, http.StatusForbidden, code, "the allowlist is checked before the password")
	code, _ = get("open.auth.test", "", "")
	assert.Equal(t, http.StatusOK, code, "allow alone asks no password")
}
