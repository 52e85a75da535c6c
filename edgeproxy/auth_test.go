package edgeproxy_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// htpasswdLine is "user:<bcrypt of pass>" at the minimum cost (fast tests).
func htpasswdLine(t testing.TB, user, pass string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	require.NoError(t, err)
	return user + ":" + string(h)
}

// authEchoBackend answers "auth=<the Authorization header it got>".
func authEchoBackend(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "auth="+r.Header.Get("Authorization"))
	}))
	t.Cleanup(s.Close)
	return s
}

// authCase sends one request through c and checks the answer.
func authCase(t *testing.T, c *http.Client, url, host, method, user, pass string) (int, http.Header, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("x")
	}
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	req.Host = host
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// R73 (basic auth): on every HTTP path (plain HTTP through the event loop
// and through the goroutine loop, GET and POST; HTTPS over HTTP/1.1 and
// HTTP/2) a route with basic_auth answers 401 with WWW-Authenticate
// without credentials, with a wrong password and with an unknown user,
// and proxies with the right ones without passing the Authorization
// header on; a route without basic_auth passes it on untouched.
func TestR73_BasicAuthOnEveryPath(t *testing.T) {
	be := authEchoBackend(t)
	line := htpasswdLine(t, "alice", "s3cret")
	guarded := func(host, policy string) routetable.HTTPRoute {
		r := tlsRoute(host, policy, addrOf(be))
		r.BasicAuth = []string{htpasswdLine(t, "bob", "other"), line}
		return r
	}
	check := func(name string, c *http.Client, url, host string) {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			code, h, body := authCase(t, c, url, host, m, "", "")
			assert.Equal(t, http.StatusUnauthorized, code, "%s %s: no credentials", name, m)
			assert.Equal(t, `Basic realm="`+host+`", charset="UTF-8"`, h.Get("WWW-Authenticate"), name)
			assert.NotContains(t, body, "auth=", name)
			code, _, _ = authCase(t, c, url, host, m, "alice", "wrong")
			assert.Equal(t, http.StatusUnauthorized, code, "%s %s: wrong password", name, m)
			code, _, _ = authCase(t, c, url, host, m, "mallory", "s3cret")
			assert.Equal(t, http.StatusUnauthorized, code, "%s %s: unknown user", name, m)
			code, _, body = authCase(t, c, url, host, m, "alice", "s3cret")
			assert.Equal(t, http.StatusOK, code, "%s %s: right credentials", name, m)
			assert.Equal(t, "auth=", body, "%s %s: the backend never sees the password", name, m)
		}
	}
	for _, loops := range []int{1, -1} {
		e := startEdge(t, func(c *edgeproxy.Config) { c.EventLoops = loops })
		e.publish(t, httpTable(1, guarded("auth.test", ""), route("open.test", addrOf(be))))
		check(fmt.Sprintf("plain loops=%d", loops), e.client, "http://"+e.srv.HTTPAddr()+"/", "auth.test")
		code, _, body := authCase(t, e.client, "http://"+e.srv.HTTPAddr()+"/", "open.test", http.MethodGet, "alice", "s3cret")
		assert.Equal(t, http.StatusOK, code)
		assert.True(t, strings.HasPrefix(body, "auth=Basic "), "a route without basic_auth passes Authorization on: %q", body)
	}
	ca := newTestCA(t)
	e := startTLSEdge(t, "")
	c, k := ca.valid(t, "auth.test")
	_, err := certstore.AddStatic(e.stateDir, "auth.test", c, k, time.Now())
	require.NoError(t, err)
	e.publish(t, httpTable(1, guarded("auth.test", "always")))
	waitServed(t, e, "auth.test", ca.pool)
	for _, h2 := range []bool{false, true} {
		check(fmt.Sprintf("https h2=%v", h2), httpsClient(e, ca.pool, h2), "https://auth.test/", "auth.test")
	}
	// tls always: plain HTTP is redirected before any password is asked.
	code, _, _ := authCase(t, noRedirect(e), "http://auth.test/", "auth.test", http.MethodGet, "", "")
	assert.Equal(t, http.StatusPermanentRedirect, code)
}

// R73 (allow): a client outside allow gets 403, whatever credentials it
// sends; inside, the request goes on (to basic auth when set). The client
// address is the peer, or with the peer a trusted proxy, the right-most
// X-Forwarded-For address that is not a trusted proxy; an untrusted peer
// cannot claim another address.
func TestR73_AllowlistChecksClientAfterTrustedProxies(t *testing.T) {
	be := authEchoBackend(t)
	withAllow := func(host string, allow ...string) routetable.HTTPRoute {
		r := route(host, addrOf(be))
		r.Allow = allow
		return r
	}
	both := withAllow("both.test", "127.0.0.0/8")
	both.BasicAuth = []string{htpasswdLine(t, "alice", "s3cret")}
	table := httpTable(1, withAllow("in.test", "192.0.2.0/24", "127.0.0.1"), withAllow("out.test", "10.0.0.0/8", "::1"), both)
	for _, loops := range []int{1, -1} {
		e := startEdge(t, func(c *edgeproxy.Config) { c.EventLoops = loops })
		e.publish(t, table)
		code, _ := e.get(t, "in.test", "/")
		assert.Equal(t, http.StatusOK, code, "loops=%d: 127.0.0.1 is allowed", loops)
		code, body := e.get(t, "out.test", "/")
		assert.Equal(t, http.StatusForbidden, code, "loops=%d: 127.0.0.1 is outside", loops)
		assert.Contains(t, body, "127.0.0.1 is not allowed on out.test")
		code, _ = e.get(t, "out.test", "/", "X-Forwarded-For", "10.1.2.3")
		assert.Equal(t, http.StatusForbidden, code, "an untrusted peer cannot claim an address")
		code, _ = e.get(t, "both.test", "/")
		assert.Equal(t, http.StatusUnauthorized, code, "inside allow, basic auth still applies")
	}
	e := startEdge(t, func(c *edgeproxy.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("192.0.2.0/24")}
	})
	e.publish(t, table)
	for _, tc := range []struct {
		xff  string
		want int
	}{
		{"", http.StatusForbidden},                          // the trusted peer itself
		{"10.1.2.3", http.StatusOK},                         // forwarded by a trusted peer
		{"10.1.2.3, 192.0.2.7", http.StatusOK},              // through two trusted proxies
		{"10.1.2.3, 203.0.113.9", http.StatusForbidden},     // right-most untrusted hop decides
		{"203.0.113.9, 10.1.2.3", http.StatusOK},            // a left-most claim is not believed
		{"garbage", http.StatusForbidden},                   // unparseable: no address
		{"[2001:db8::1]:443, 10.9.9.9:1234", http.StatusOK}, // with ports
	} {
		var code int
		if tc.xff == "" {
			code, _ = e.get(t, "out.test", "/")
		} else {
			code, _ = e.get(t, "out.test", "/", "X-Forwarded-For", tc.xff)
		}
		assert.Equal(t, tc.want, code, "X-Forwarded-For %q", tc.xff)
	}
}

// R73: a route table whose basic_auth entry is not an htpasswd bcrypt
// line, or whose allow entry is not a CIDR, is rejected, and the error
// never carries the entry's password or hash.
func TestR73_TableRejectsBadAccessEntriesWithoutEchoingThem(t *testing.T) {
	good := htpasswdLine(t, "alice", "s3cret")
	for _, tc := range []struct {
		name         string
		auth, allow  []string
		want, secret string
	}{
		{"plain text", []string{"alice:hunter2"}, nil, "htpasswd -nbB", "hunter2"},
		{"md5", []string{"alice:$apr1$abc$defdefdefdefdefdefdefd"}, nil, "MD5", "$apr1$abc"},
		{"sha", []string{"alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="}, nil, "SHA-1", "W6ph5"},
		{"duplicate user", []string{good, good}, nil, "twice", good[6:]},
		{"bad cidr", nil, []string{"10.0.0.0/33"}, "not a CIDR", "\x00"},
	} {
		r := route("a.test", "127.0.0.1:1")
		r.BasicAuth, r.Allow = tc.auth, tc.allow
		_, err := edgeproxy.LoadTable(mustJSON(t, httpTable(1, r)))
		require.Error(t, err, tc.name)
		assert.True(t, errors.Is(err, edgeproxy.ErrInvalidTable), tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		assert.NotContains(t, err.Error(), tc.secret, tc.name)
	}
}
