//go:build linux

package edgeproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// answeringBackend writes answer to every request it reads and keeps the
// connection open for the next one.
func answeringBackend(t *testing.T, answer string) string {
	t.Helper()
	return rawBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	})
}

const postApp = "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 2\r\n\r\nhi"

// A backend's response head over 1 MiB is a 502 on every path (the event
// loop, the goroutine path's GET transport and net/http's transport for
// requests with a body); one under it passes.
func TestBackendResponseHeadOver1MiBIs502OnEveryPath(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		for _, tc := range []struct {
			size   int
			status int
		}{{900 << 10, http.StatusOK}, {(1 << 20) + 1024, http.StatusBadGateway}, {3 << 20, http.StatusBadGateway}} {
			backend := answeringBackend(t, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("b", tc.size)+"\r\nContent-Length: 2\r\n\r\nok")
			s := hostileEdge(t, loops, Config{}, backend)
			for _, req := range []string{getApp, postApp, "GET / HTTP/1.0\r\nHost: app.test\r\n\r\n"} {
				a := rawRoundTrip(t, s.HTTPAddr(), req, 10*time.Second)
				assert.Equal(t, tc.status, a.resp.StatusCode, "%q with a %d-byte header", req, tc.size)
			}
		}
	})
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// A backend that sends informational (1xx) answers without end: the
// client gets a final answer (502 once the informational heads pass the
// response head limit, or 504 at the response timeout) with at most about
// that limit of informational bytes before it, on every path.
func TestBackend1xxFloodEndsInAFinalAnswer(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		backend := rawBackend(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			for {
				if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
					return
				}
			}
		})
		s := hostileEdge(t, loops, Config{ResponseTimeout: 5 * time.Second}, backend)
		for _, req := range []string{getApp, postApp, "GET / HTTP/1.0\r\nHost: app.test\r\n\r\n"} {
			start := time.Now()
			c, err := net.Dial("tcp", s.HTTPAddr())
			if !assert.NoError(t, err) {
				return
			}
			_ = c.SetDeadline(time.Now().Add(8 * time.Second))
			_, _ = io.WriteString(c, req)
			cr := &countingReader{r: c}
			br := bufio.NewReader(cr)
			code := 0
			for code < 200 {
				resp, err := http.ReadResponse(br, nil)
				if !assert.NoError(t, err, "%q: after %d bytes", req, cr.n) {
					break
				}
				code = resp.StatusCode
			}
			c.Close()
			assert.Equal(t, http.StatusBadGateway, code, "%q", req)
			assert.Less(t, cr.n, int64(1<<20)+(64<<10), "%q: bytes the client got", req)
			assert.Less(t, time.Since(start), 4*time.Second, "%q", req)
		}
	})
}
