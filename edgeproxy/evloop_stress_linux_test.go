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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// stallBound fails a client of the load tests below whose connection makes
// no progress for this long: a stall of the event loops (a lost wake-up, a
// write never resumed) fails them however long it lasts. There is no bound
// on a whole run: with the race detector and a CPU hog on a loaded 2-core
// machine, 200 clients took 14-22 s, and those still unanswered at 20 s
// had all had a byte within the last 2.5 s.
const stallBound = 15 * time.Second

// stallConn is a client connection whose every read and write must make
// progress within stallBound.
type stallConn struct{ net.Conn }

func (c stallConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(stallBound))
	return c.Conn.Read(p)
}

func (c stallConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(stallBound))
	return c.Conn.Write(p)
}

func TestEventLoopAnswers200ConcurrentClientsMixedRequests(t *testing.T) {
	body := func(p string, n int) string { return strings.Repeat(p[1:2], n) }
	backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		var n int
		fmt.Sscanf(r.URL.Query().Get("n"), "%d", &n)
		switch {
		case strings.HasPrefix(p, "/c"):
			b := body(p, n)
			w.Write([]byte(b[:len(b)/2]))
			w.(http.Flusher).Flush()
			w.Write([]byte(b[len(b)/2:]))
		case strings.HasPrefix(p, "/p"):
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
		default:
			w.Header().Set("Content-Length", fmt.Sprint(n))
			io.WriteString(w, body(p, n))
		}
	})
	e := startLoopEdgeCfg(t, Config{DialTimeout: time.Second, ShutdownTimeout: 2 * time.Second}, route(backend))
	var wg sync.WaitGroup
	var fails atomic.Int32
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", e.s.HTTPAddr())
			if err != nil {
				fails.Add(1)
				return
			}
			defer nc.Close()
			c := stallConn{nc}
			br := bufio.NewReader(c)
			for j := range 15 {
				k := (i + j) % 6
				var req, want string
				n := []int{5, 1000, 16000, 16300, 40000, 7}[k]
				switch k {
				case 0, 1, 2, 3, 4:
					p := fmt.Sprintf("/%c%d", 'a'+k, i)
					if k == 4 && j%2 == 0 {
						p = fmt.Sprintf("/c%d", i)
					}
					req = fmt.Sprintf("GET %s?n=%d HTTP/1.1\r\nHost: app.test\r\n\r\n", p, n)
					want = body(p, n)
				case 5:
					want = fmt.Sprintf("post%d-%d", i, j)
					req = fmt.Sprintf("POST /p HTTP/1.1\r\nHost: app.test\r\nContent-Length: %d\r\n\r\n%s", len(want), want)
				}
				if j%5 == 4 { // pipeline two
					req += req
				}
				if _, err := io.WriteString(c, req); err != nil {
					fails.Add(1)
					return
				}
				for range 1 + btoi(j%5 == 4) {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Errorf("client %d req %d: %v", i, j, err)
						fails.Add(1)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					if string(b) != want {
						t.Errorf("client %d req %d: got %d bytes, want %d (%.20q)", i, j, len(b), len(want), b)
						fails.Add(1)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, fails.Load())
	require.Eventually(t, func() bool { g, c := inFlight(e.s, backend); return g == 0 && c == 0 }, 3*time.Second, 20*time.Millisecond)
	served, handoffs := loopCounts(e.s)
	t.Logf("served in loop %v, handoffs %v", served, handoffs)
}

// Route switch: old backend's idle loop connections closed within ~250ms.
func TestEventLoopRouteSwitchClosesOldBackendConnections(t *testing.T) {
	var aClosed atomic.Int32
	mk := func(name string, closed *atomic.Int32) string {
		return rawBackend(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			for {
				if _, err := http.ReadRequest(br); err != nil {
					if closed != nil {
						closed.Add(1)
					}
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n"+name)
			}
		})
	}
	a, b := mk("A", &aClosed), mk("B", nil)
	e := startLoopEdgeCfg(t, Config{DialTimeout: time.Second, ShutdownTimeout: time.Second}, route(a))
	c, _ := net.Dial("tcp", e.s.HTTPAddr())
	defer c.Close()
	br := bufio.NewReader(c)
	_, body := get(t, c, br, "/")
	require.Equal(t, "A", body)
	require.NoError(t, e.s.Apply(routetable.Table{Schema: routetable.Schema, Generation: 2, Graph: routetable.Graph{HTTP: []routetable.HTTPRoute{route(b)}}}))
	start := time.Now()
	_, body = get(t, c, br, "/")
	require.Equal(t, "B", body)
	require.Eventually(t, func() bool { return aClosed.Load() == 1 }, time.Second, 5*time.Millisecond)
	assert.Less(t, time.Since(start), 400*time.Millisecond)
	// and back to A: no stale pooled A connection is used
	require.NoError(t, e.s.Apply(routetable.Table{Schema: routetable.Schema, Generation: 3, Graph: routetable.Graph{HTTP: []routetable.HTTPRoute{route(a)}}}))
	_, body = get(t, c, br, "/")
	require.Equal(t, "A", body)
}

// Dial timeout to a blackhole, per route.
func blackhole(t *testing.T) string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, _ := syscall.Getsockname(fd)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for range 3 { // fill the accept queue: later SYNs are dropped
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	require.Error(t, err, "blackhole")
	_ = c
	return addr
}

func TestEventLoopRouteDialTimeoutIs504(t *testing.T) {
	bh := blackhole(t)
	e := startLoopEdgeCfg(t, Config{DialTimeout: 5 * time.Second, ShutdownTimeout: time.Second},
		route(bh, func(rt *routetable.HTTPRoute) { rt.DialTimeoutMS = 300 }))
	c, _ := net.Dial("tcp", e.s.HTTPAddr())
	defer c.Close()
	start := time.Now()
	resp, _ := get(t, c, bufio.NewReader(c), "/")
	el := time.Since(start)
	assert.Equal(t, 504, resp.StatusCode)
	assert.Greater(t, el, 280*time.Millisecond)
	assert.Less(t, el, 500*time.Millisecond)
	g, n := inFlight(e.s, bh)
	assert.Zero(t, g)
	assert.Zero(t, n)
}

func TestEventLoopRelaysSegmentedBackendAnswersUnderLoad(t *testing.T) {
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
				// A gap between segments so that the edge reads them
				// apart: segmentation is the input under test, not a wait.
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
			nc, err := net.Dial("tcp", e.s.HTTPAddr())
			if !assert.NoError(t, err) {
				return
			}
			defer nc.Close()
			c := stallConn{nc}
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
