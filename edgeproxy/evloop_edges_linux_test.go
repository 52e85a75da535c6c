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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
)

// rawBackend accepts connections and runs serve on each.
func rawBackend(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return ln.Addr().String()
}

// BUG A: pipelined requests that fill the 4 KiB client buffer exactly at a
// request boundary: the bytes still in the socket are never read (ET).
func TestEventLoopPipelineExactly4KiB(t *testing.T) {
	backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) })
	s := loopEdge(t, backend)
	const fixed = len("GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
	var req strings.Builder
	for i := range 9 {
		p := fmt.Sprintf("/p%d-", i)
		p += strings.Repeat("x", 512-fixed-len(p)+1)
		r := "GET " + p + " HTTP/1.1\r\nHost: app.test\r\n\r\n"
		require.Len(t, r, 512)
		req.WriteString(r)
	}
	c, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, req.String()) // 9*512 = 4608 bytes, one write
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	br := bufio.NewReader(c)
	for i := range 9 {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err, "response %d", i)
		b, _ := io.ReadAll(resp.Body)
		require.True(t, strings.HasPrefix(string(b), fmt.Sprintf("/p%d-", i)))
	}
}

// BUG B: a bare-LF response head whose body holds CRLFCRLF: the loop took
// the body's CRLFCRLF as the end of the head and waited forever. Both
// paths read the head by lines.
func TestEventLoopBareLFHeadWithCRLFCRLFInBody(t *testing.T) {
	for _, loops := range []int{1, -1} {
		t.Run(fmt.Sprintf("event_loops=%d", loops), func(t *testing.T) { testBareLFHead(t, loops) })
	}
}

func testBareLFHead(t *testing.T, loops int) {
	backend := rawBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			body := "a\r\n\r\nbcdef"
			fmt.Fprintf(c, "HTTP/1.1 200 OK\nContent-Length: %d\n\n%s", len(body), body)
		}
	})
	s := runEdge(t, loops, backend, func(rt *routetable.HTTPRoute) { rt.ResponseHeaderTimeoutMS = 500 })
	c, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "no answer within 3s")
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, "a\r\n\r\nbcdef", string(b))
}

// BUG C: a response of exactly EvMaxResponse bytes followed by stray bytes:
// the connection is pooled with them unread; the next client gets them.
func TestEventLoopExact16KiBThenStrayBytesPooled(t *testing.T) {
	var calls atomic.Int32
	backend := rawBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			if calls.Add(1) == 1 {
				head := "HTTP/1.1 200 OK\r\nContent-Length: %05d\r\n\r\n"
				blen := dataplane.EvMaxResponse - len(fmt.Sprintf(head, 0))
				msg := fmt.Sprintf(head, blen) + strings.Repeat("z", blen)
				msg += "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray"
				io.WriteString(c, msg)
				continue
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood")
		}
	})
	s := loopEdge(t, backend)
	c1, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer c1.Close()
	resp, body := get(t, c1, bufio.NewReader(c1), "/first")
	require.Equal(t, 200, resp.StatusCode)
	require.Len(t, body, dataplane.EvMaxResponse-len("HTTP/1.1 200 OK\r\nContent-Length: 00000\r\n\r\n"))
	// The stray bytes came in the backend's one write with the answer:
	// they are in the pooled connection's buffer by now.
	c2, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer c2.Close()
	_, body = get(t, c2, bufio.NewReader(c2), "/second")
	require.Equal(t, "good", body, "another request's bytes relayed")
	_ = testutil.ToFloat64
}

// A backend that speaks first (its answer arrives with the connect
// completion, in the same edge-triggered event) is read, not left in the
// socket with the client waiting forever.
func TestEventLoopBackendAnswersOnAccept(t *testing.T) {
	backend := rawBackend(t, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nearly")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.Copy(io.Discard, c)
	})
	s := loopEdge(t, backend)
	var hung atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				c, err := net.Dial("tcp", s.HTTPAddr())
				if err != nil {
					continue
				}
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
				if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
					hung.Add(1)
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	require.Zero(t, hung.Load(), "requests without an answer")
}

// A backend that closes every kept-alive connection after one answer: the
// one retry dials instead of taking another pooled connection that is
// just as dead, so no client sees a 502 (both paths).
func TestRetryAfterDeadPooledConnectionDials(t *testing.T) {
	for _, loops := range []int{-1, 1} {
		t.Run(fmt.Sprintf("event_loops=%d", loops), func(t *testing.T) {
			backend := rawBackend(t, func(c net.Conn) {
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") // then closes without saying so
				// Jitter, not a wait: it varies the race between this
				// close and the pooled connection's next use.
				time.Sleep(time.Duration(1+len(c.RemoteAddr().String())%3) * time.Millisecond)
			})
			s := runEdge(t, loops, backend)
			var bad atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := net.Dial("tcp", s.HTTPAddr())
					if err != nil {
						bad.Add(1)
						return
					}
					defer c.Close()
					br := bufio.NewReader(c)
					for i := range 100 {
						_ = c.SetDeadline(time.Now().Add(3 * time.Second))
						fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
						resp, err := http.ReadResponse(br, nil)
						if err != nil {
							bad.Add(1)
							return
						}
						_, _ = io.ReadAll(resp.Body)
						if resp.StatusCode != http.StatusOK {
							bad.Add(1)
						}
						// Jitter, not a wait: it varies when the next
						// request meets a pooled connection the backend closed.
						time.Sleep(time.Duration(i%4) * time.Millisecond)
					}
				}()
			}
			wg.Wait()
			require.Zero(t, bad.Load(), "failed requests")
		})
	}
}
