package edgeproxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// Hostile clients and backends against the edge's HTTP/2 server.

// h2EdgeTo runs an edge with a static certificate for host routed to the
// backend at addr (tlsH1Edge for a raw backend).
func h2EdgeTo(t *testing.T, host, addr string) *edge {
	t.Helper()
	ca := newTestCA(t)
	e := startTLSEdge(t, "")
	c, k := ca.valid(t, host)
	_, err := certstore.AddStatic(e.stateDir, host, c, k, time.Now())
	require.NoError(t, err)
	e.publish(t, httpTable(1, tlsRoute(host, "", addr)))
	waitServed(t, e, host, ca.pool)
	return e
}

// R62 (HTTP/2, hostile backend): a chunked answer the backend cuts short
// (it closes before the last chunk), or a sized one shorter than its
// Content-Length, reaches the client as a reset stream, never as a whole
// answer ending with END_STREAM, on the fast path (GET) and through
// ServeHTTP (POST) alike (ServeHTTP's ReverseProxy ended such a stream
// normally: it aborts only under a server context).
func TestR62_H2TruncatedChunkedAnswerIsReset(t *testing.T) {
	addr := serveConns(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if req.URL.Path == "/sized" {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nhello")
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	})
	e := h2EdgeTo(t, "trunc2.test", addr)
	for i, method := range []string{"GET", "POST", "GET", "POST"} {
		path := "/"
		if i >= 2 {
			path = "/sized"
		}
		r := dialRawH2(t, e, "trunc2.test")
		id := uint32(1)
		r.request(id, method == "GET", method, path, "trunc2.test")
		if method == "POST" {
			require.NoError(t, r.fr.WriteData(id, true, []byte("x")))
		}
		a := r.readAnswer(id)
		assert.True(t, a.wasReset, "%s (%d): a cut answer is reset, got status %q body %q ended %v", method, i, a.status, a.body.String(), a.ended)
		assert.False(t, a.ended, "%s: END_STREAM on a cut answer", method)
	}
}
