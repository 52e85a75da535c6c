package edgeproxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// R60 (drain): a request that reaches an idle keep-alive connection just
// after a drain began, and that the loop hands to net/http (it has a
// body), is answered, over plain HTTP and over TLS: net/http's servers
// shut down only after the loops have drained, so the hand-off still
// finds a server.
func TestR60_DrainAnswersARequestTheLoopHandsOff(t *testing.T) {
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			release := make(chan struct{})
			started := make(chan struct{}, 1)
			b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					started <- struct{}{}
					<-release
				}
				got, _ := io.ReadAll(r.Body)
				_, _ = io.WriteString(w, r.Method+" "+string(got))
			}))
			t.Cleanup(b.Close)
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free) // before b.Close, should the test fail early
			var e *edge
			var dial func() (net.Conn, *bufio.Reader)
			if scheme == "http" {
				e = startEdge(t)
				e.publish(t, httpTable(1, route("handoff.test", addrOf(b))))
				dial = func() (net.Conn, *bufio.Reader) {
					c, err := net.Dial("tcp", e.srv.HTTPAddr())
					require.NoError(t, err)
					t.Cleanup(func() { c.Close() })
					return c, bufio.NewReader(c)
				}
			} else {
				var ca *testCA
				e, ca = tlsH1Edge(t, "handoff.test", b)
				dial = func() (net.Conn, *bufio.Reader) {
					r := dialRawTLS(t, e, ca, "handoff.test", "http/1.1")
					return r.c, r.br
				}
			}
			// A slow request keeps the drain going.
			slow, slowBR := dial()
			_, err := io.WriteString(slow, "GET /slow HTTP/1.1\r\nHost: handoff.test\r\n\r\n")
			require.NoError(t, err)
			<-started
			// An idle keep-alive connection, its first request served by the loop.
			c, br := dial()
			require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = io.WriteString(c, "GET /first HTTP/1.1\r\nHost: handoff.test\r\n\r\n")
			require.NoError(t, err)
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			_, _ = io.ReadAll(resp.Body)

			stopped := make(chan struct{})
			go func() { e.stop(); close(stopped) }()
			// The drain has begun once the listener refuses (it closes first);
			// the request then goes at once, well within DrainIdleGrace.
			addr := e.srv.HTTPAddr()
			if scheme == "https" {
				addr = e.srv.HTTPSAddr()
			}
			require.Eventually(t, func() bool {
				c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
				if err == nil {
					c.Close()
				}
				return err != nil
			}, 5*time.Second, time.Millisecond, "the listener closes when the drain begins")
			_, err = io.WriteString(c, "POST /late HTTP/1.1\r\nHost: handoff.test\r\nContent-Length: 4\r\n\r\nbody")
			require.NoError(t, err)
			resp, err = http.ReadResponse(br, nil)
			require.NoError(t, err, "the request handed off during the drain was answered")
			got, _ := io.ReadAll(resp.Body)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "POST body", string(got))

			free()
			resp, err = http.ReadResponse(slowBR, nil)
			require.NoError(t, err)
			got, _ = io.ReadAll(resp.Body)
			assert.True(t, strings.HasPrefix(string(got), "GET"))
			<-stopped
		})
	}
}
