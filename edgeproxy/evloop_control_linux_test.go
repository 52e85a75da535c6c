//go:build linux

package edgeproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/routetable"
)

func noLoopEdge(t *testing.T, backend string) *Server {
	s := New(Config{StateDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", EventLoops: -1, PollInterval: time.Hour, DialTimeout: time.Second, ShutdownTimeout: 2 * time.Second, ReadHeaderTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-s.Ready()
	require.Len(t, s.h1.loops, 0)
	rt := routetable.HTTPRoute{Host: "app.test", App: "app", Service: "web", Backends: []routetable.Backend{{Addr: backend, Container: "c1"}}}
	require.NoError(t, s.Apply(routetable.Table{Schema: routetable.Schema, Generation: 1, Graph: routetable.Graph{HTTP: []routetable.HTTPRoute{rt}}}))
	return s
}

func TestIssue5_GoroutinePathBareLFHead(t *testing.T) {
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
	s := noLoopEdge(t, backend)
	c, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, "a\r\n\r\nbcdef", string(b))
}
