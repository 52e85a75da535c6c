//go:build linux

package edgeproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hostile inputs, each on both HTTP paths: the event loop (1) and the
// goroutine per connection (-1).

func bothPaths(t *testing.T, f func(t *testing.T, loops int)) {
	for _, loops := range []int{1, -1} {
		t.Run(fmt.Sprintf("event_loops=%d", loops), func(t *testing.T) { f(t, loops) })
	}
}

// rawAnswer is what a client read back for one raw request.
type rawAnswer struct {
	resp    *http.Response
	body    string
	bodyErr error
	// closed: the edge closed the connection after the answer.
	closed bool
}

// rawRoundTrip writes req on a new connection to addr and reads one answer
// (within d), then, for a 200 or an answer that says Connection: close,
// whether the connection was closed after it.
func rawRoundTrip(t *testing.T, addr, req string, d time.Duration) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(d)))
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "no answer within %s", d)
	b, berr := io.ReadAll(resp.Body)
	a := rawAnswer{resp: resp, body: string(b), bodyErr: berr}
	if berr == nil && (resp.Close || resp.StatusCode == http.StatusOK) {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, err := br.ReadByte()
		a.closed = errors.Is(err, io.EOF) || err != nil && !isTimeout(err)
	} else {
		a.closed = true
	}
	return a
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

const getApp = "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n"

// A backend that writes part of an answer and closes at once (a crash after
// writing): every client gets a 502 or a truncated body and a close, none
// hangs (the event loop did not look at the close that came in the same
// wake-up as the data).
func TestBackendDyingMidAnswerNeverHangsTheClient(t *testing.T) {
	answers := map[string]string{
		"partial head":         "HTTP/1.1 200 OK\r\nContent-Le",
		"head and short body":  "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
		"non-HTTP bytes":       "SSH-2.0-OpenSSH_9.2\r\n",
		"chunked, cut":         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
		"head only, no length": "HTTP/1.1 200 OK\r\n",
	}
	bothPaths(t, func(t *testing.T, loops int) {
		for name, answer := range answers {
			t.Run(name, func(t *testing.T) {
				backend := rawBackend(t, func(c net.Conn) {
					br := bufio.NewReader(c)
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					_, _ = io.WriteString(c, answer) // then closed at once
				})
				s := runEdge(t, loops, backend)
				for i := range 10 {
					a := rawRoundTrip(t, s.HTTPAddr(), getApp, 5*time.Second)
					if a.resp.StatusCode == http.StatusOK {
						assert.Error(t, a.bodyErr, "request %d: a truncated body must not look whole", i)
					} else {
						assert.Equal(t, http.StatusBadGateway, a.resp.StatusCode, "request %d", i)
					}
					assert.True(t, a.closed || a.resp.StatusCode == http.StatusBadGateway, "request %d: connection closed after a cut answer", i)
				}
			})
		}
	})
}

var _ = strings.Repeat
