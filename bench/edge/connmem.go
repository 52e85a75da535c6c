package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/bench/internal/proc"
)

// connMemory is what one client connection costs a target, in KiB of RSS:
// idle (a keep-alive connection that served one request) and holding a
// partial request head (a slow or hostile client, ~500 bytes sent).
type connMemory struct {
	idleKiB, partialKiB float64
}

// measureConnMemory opens n idle keep-alive connections to t, then n more
// that each send a partial head, and reads t's RSS after each step: the
// figures are the RSS growth per connection (both sets stay open, so the
// second step does not reuse memory the first freed).
func measureConnMemory(t *target, host string, n int) (connMemory, error) {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	settle := func() int64 {
		time.Sleep(700 * time.Millisecond)
		return proc.RSSKiB(t.pids()...)
	}
	base := settle()
	for range n {
		c, err := net.DialTimeout("tcp", t.addr, 2*time.Second)
		if err != nil {
			return connMemory{}, err
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
			return connMemory{}, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return connMemory{}, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	idle := settle()
	partial := "GET / HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: edgebench\r\nX-Partial: " + strings.Repeat("p", 440)
	for range n {
		c, err := net.DialTimeout("tcp", t.addr, 2*time.Second)
		if err != nil {
			return connMemory{}, err
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, partial); err != nil {
			return connMemory{}, err
		}
	}
	part := settle()
	return connMemory{
		idleKiB:    float64(idle-base) / float64(n),
		partialKiB: float64(part-idle) / float64(n),
	}, nil
}
