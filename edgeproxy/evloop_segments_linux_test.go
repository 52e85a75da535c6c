//go:build linux

package edgeproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIssue5_EventLoopSegmentedBackendAndLoopStress(t *testing.T) {
	backend := rawBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			var n, seg int
			fmt.Sscanf(req.URL.Query().Get("n"), "%d", &n)
			fmt.Sscanf(req.URL.Query().Get("seg"), "%d", &seg)
			body := strings.Repeat(req.URL.Path[1:2], n)
			msg := fmt.Sprintf("HTTP/1.1 200 OK\r\nX-Pad: %s\r\nContent-Length: %d\r\n\r\n%s", strings.Repeat("p", n%97), n, body)
			if req.Method == "HEAD" {
				msg = msg[:strings.Index(msg, "\r\n\r\n")+4]
			}
			if seg <= 1 {
				c.Write([]byte(msg))
				continue
			}
			step := len(msg)/seg + 1
			for i := 0; i < len(msg); i += step {
				c.Write([]byte(msg[i:min(i+step, len(msg))]))
				time.Sleep(time.Millisecond)
			}
		}
	})
	e := startLoopEdgeCfg(t, Config{DialTimeout: time.Second, ShutdownTimeout: 2 * time.Second}, route(backend))
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", e.s.HTTPAddr())
			if !assert.NoError(t, err) {
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(c)
			for j := range 30 {
				n := (i*131 + j*977) % 16200
				seg := (i + j) % 4
				method := "GET"
				if j%7 == 3 {
					method = "HEAD"
				}
				p := fmt.Sprintf("/%c", 'a'+(i+j)%26)
				fmt.Fprintf(c, "%s %s?n=%d&seg=%d HTTP/1.1\r\nHost: app.test\r\n\r\n", method, p, n, seg)
				resp, err := http.ReadResponse(br, &http.Request{Method: method})
				if !assert.NoError(t, err, "client %d req %d", i, j) {
					return
				}
				b, _ := io.ReadAll(resp.Body)
				want := strings.Repeat(p[1:2], n)
				if method == "HEAD" {
					want = ""
					assert.Equal(t, int64(n), resp.ContentLength)
				}
				if !assert.Equal(t, want, string(b), "client %d req %d", i, j) {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool { g, c := inFlight(e.s, backend); return g == 0 && c == 0 }, 3*time.Second, 20*time.Millisecond)
	served, handoffs := loopCounts(e.s)
	t.Logf("served %v handoffs %v", served, handoffs)
}
