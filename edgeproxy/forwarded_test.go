package edgeproxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// From an untrusted peer the incoming chain is
// replaced; from a trusted proxy it is kept and extended. X-Request-ID is
// added when absent and kept when present.
func TestForwardedChainTrustedOnlyFromTrustedProxies(t *testing.T) {
	type seen struct{ xff, xfp, xfh, fwd, rid string }
	got := make(chan seen, 1)
	be := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got <- seen{r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"), strings.Join(r.Header.Values("Forwarded"), ", "), r.Header.Get("X-Request-ID")}
	}))
	t.Cleanup(be.Close)
	spoof := []string{
		"X-Forwarded-For", "6.6.6.6",
		"X-Forwarded-Proto", "https",
		"X-Forwarded-Host", "front.test",
		"Forwarded", "for=6.6.6.6;proto=https",
	}

	untrusted := startEdge(t, func(c *edgeproxy.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	untrusted.publish(t, httpTable(1, route("app.test", addrOf(be))))
	code, _ := untrusted.get(t, "app.test", "/", spoof...)
	require.Equal(t, http.StatusOK, code)
	s := <-got
	assert.Equal(t, "127.0.0.1", s.xff)
	assert.Equal(t, "http", s.xfp)
	assert.Equal(t, "app.test", s.xfh)
	assert.Equal(t, `for=127.0.0.1;host="app.test";proto=http`, s.fwd)
	assert.Len(t, s.rid, 32, "X-Request-ID added")

	trusted := startEdge(t, func(c *edgeproxy.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	trusted.publish(t, httpTable(1, route("app.test", addrOf(be))))
	code, _ = trusted.get(t, "app.test", "/", append(spoof, "X-Request-ID", "req-42")...)
	require.Equal(t, http.StatusOK, code)
	s = <-got
	assert.Equal(t, "6.6.6.6, 127.0.0.1", s.xff)
	assert.Equal(t, "https", s.xfp)
	assert.Equal(t, "front.test", s.xfh)
	assert.Equal(t, `for=6.6.6.6;proto=https, for=127.0.0.1;host="app.test";proto=https`, s.fwd)
	assert.Equal(t, "req-42", s.rid)
}

// The other headers
// backends believe about the client (X-Real-Ip, X-Forwarded-Port, ...) are
// removed from an untrusted peer and kept from a trusted proxy, on every
// path: the event loop, the goroutine loop and net/http (a request with a
// body); and a 204 goes out without a Content-Length (RFC 9110 §8.6).
func TestClientClaimsOnlyFromTrustedProxies(t *testing.T) {
	got := make(chan string, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Real-Ip") + "|" + r.Header.Get("X-Forwarded-Port") + "|" + r.Header.Get("True-Client-Ip") + "|" + r.Header.Get("X-Other")
	}))
	t.Cleanup(be.Close)
	// A backend that sends a Content-Length on its 204 (net/http's server
	// would drop it).
	raw := serveConns(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nX-Ok: 1\r\n\r\n")
		}
	})
	claims := []string{"X-Real-IP", "6.6.6.6", "X-Forwarded-Port", "443", "True-Client-IP", "6.6.6.6", "X-Other", "kept"}
	for _, loops := range []int{1, -1} {
		for _, trust := range []string{"10.0.0.0/8", "127.0.0.0/8"} {
			name := fmt.Sprintf("loops=%d trusted=%s", loops, trust)
			e := startEdge(t, func(c *edgeproxy.Config) {
				c.EventLoops = loops
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(trust)}
			})
			e.publish(t, httpTable(1, route("app.test", addrOf(be)), route("raw.test", raw)))
			want := "|||kept"
			if trust == "127.0.0.0/8" {
				want = "6.6.6.6|443|6.6.6.6|kept"
			}
			code, _ := e.get(t, "app.test", "/", claims...)
			require.Equal(t, http.StatusOK, code, name)
			assert.Equal(t, want, <-got, name+" GET")

			req, err := http.NewRequest(http.MethodPost, "http://"+e.srv.HTTPAddr()+"/", strings.NewReader("body"))
			require.NoError(t, err)
			req.Host = "app.test"
			for i := 0; i < len(claims); i += 2 {
				req.Header.Set(claims[i], claims[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, want, <-got, name+" POST (net/http)")

			for _, method := range []string{"GET", "POST"} {
				c, err := net.Dial("tcp", e.srv.HTTPAddr())
				require.NoError(t, err)
				body := ""
				if method == "POST" {
					body = "x" // a body: net/http's path
				}
				fmt.Fprintf(c, "%s / HTTP/1.1\r\nHost: raw.test\r\nContent-Length: %d\r\n\r\n%s", method, len(body), body)
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				var head string
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					require.NoError(t, err, name)
					head += line
					if line == "\r\n" {
						break
					}
				}
				c.Close()
				assert.Contains(t, head, "HTTP/1.1 204", name+" "+method)
				assert.NotContains(t, strings.ToLower(head), "content-length", name+" "+method+": no Content-Length in a 204")
			}
		}
	}
}
