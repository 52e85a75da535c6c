//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// The relays' bounds (docs/edge.md, "TCP and UDP relays"): with the edge
// limited to 1,024 descriptors, 1,500 idle TCP clients on one relay leave
// HTTP answering 20 requests of 20: the relays take at most the limit less
// a reserve (256 of 1,024) and close the connections over it at accept.
func TestRelayBounds_IdleTCPClientsLeaveHTTPServed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, opens 1,500 connections")
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	const clients, requests, fdLimit = 1500, 20, 1024
	bin := filepath.Join(t.TempDir(), "gordon-edge")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))

	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(web.Close)
	hold := holdingBackend(t)

	state := t.TempDir()
	logs := &lockedBuffer{}
	proc := exec.Command(prlimit, fmt.Sprintf("--nofile=%d:%d", fdLimit, fdLimit), bin, "run", "--state-dir", state,
		"--http-addr", "127.0.0.1:0", "--access-log", "off", "--log-level", "warn", "--no-handover")
	proc.Stderr = logs
	require.NoError(t, proc.Start())
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })
	st := waitStatus(t, state, func(st routetable.Status) bool { return st.AdminAddr != "" && len(st.Listeners) > 0 })
	httpAddr, admin := st.Listeners[0].Addr, st.AdminAddr

	relay := freeLoopback(t)
	table, err := json.Marshal(routetable.Table{Schema: routetable.Schema, Generation: 1, Graph: routetable.Graph{
		HTTP: []routetable.HTTPRoute{{Host: "app.test", App: "app", Service: "web", Backends: []routetable.Backend{{Addr: web.Listener.Addr().String(), Container: "c1"}}}},
		TCP:  []routetable.L4Route{{Listen: relay, App: "app", Service: "db", Backend: hold, Container: "c2"}},
	}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "edge", "routes.json"), table, 0o600))
	waitStatus(t, state, func(st routetable.Status) bool { return st.AppliedGeneration == 1 && len(st.Listeners) > 1 })

	conns := dialMany(t, relay, clients)
	require.Len(t, conns, clients, "every client connected (the kernel accepts them; the edge decides)")
	// Every connection was either relayed or refused by the edge.
	var m map[string]float64
	require.Eventually(t, func() bool {
		m = relayMetrics(t, admin, state)
		return m["gordon_edge_relay_connections"]+m["gordon_edge_relay_refused_total"] >= clients
	}, 30*time.Second, 50*time.Millisecond, "the edge never saw every client: %v", m)

	ok := 0
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < requests; i++ {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/", nil)
		req.Host = "app.test"
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ok++
			}
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", proc.Process.Pid))
	t.Logf("limit %d descriptors, %d idle clients: %v relayed, %v refused, relay descriptors %v of %v, edge descriptors %d, HTTP %d/%d",
		fdLimit, clients, m["gordon_edge_relay_connections"], m["gordon_edge_relay_refused_total"],
		m["gordon_edge_relay_descriptors"], m["gordon_edge_relay_descriptors_max"], len(fds), ok, requests)
	assert.Equal(t, requests, ok, "HTTP answers while the relay is full; edge logs:\n%s", logs.String())
	assert.Positive(t, m["gordon_edge_relay_refused_total"], "connections over the bound are refused")
	assert.LessOrEqual(t, m["gordon_edge_relay_descriptors"], m["gordon_edge_relay_descriptors_max"])
	assert.LessOrEqual(t, m["gordon_edge_relay_descriptors_max"], float64(fdLimit-256), "the reserve is kept")
	for _, c := range conns {
		_ = c.Close()
	}
}

// holdingBackend accepts TCP connections and holds them open, reading and
// dropping what they send, until the test ends.
func holdingBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	return ln.Addr().String()
}

// dialMany opens n connections to addr, 32 at a time, each within 5 s,
// and closes them when the test ends.
func dialMany(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	work := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return conns
}

// relayMetrics reads the gordon_edge_relay_* series of the edge's admin
// /metrics.
func relayMetrics(t *testing.T, admin, state string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	tok, err := edgestate.ReadAdminToken(filepath.Join(state, "edge"))
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, "http://"+admin+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok) // the admin token (docs/security.md)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if ok && strings.HasPrefix(name, "gordon_edge_relay_") {
			out[name], _ = strconv.ParseFloat(val, 64)
		}
	}
	return out
}

// freeLoopback is a loopback TCP address nothing listens on.
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
