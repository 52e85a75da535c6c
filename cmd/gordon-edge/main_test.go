package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/routetable"
)

func TestGordonEdgeVersion(t *testing.T) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	require.NoError(t, cmd.Execute())
	assert.Equal(t, "gordon-edge dev\n", out.String())
}

func TestGordonEdgeRunRequiresHTTPAddr(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"run", "--state-dir", t.TempDir()})
	err := cmd.Execute()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "http-addr")
}

// Decision 16 (graceful edge shutdown): the real binary serves a route from
// routes.json, and on SIGTERM lets a request in flight finish with 200 before
// it exits 0.
func TestDecision16_GordonEdgeSIGTERMFinishesInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "gordon-edge")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	state := t.TempDir()
	proc := exec.Command(bin, "run", "--state-dir", state, "--http-addr", "127.0.0.1:0", "--shutdown-timeout", "5s")
	logs := &lockedBuffer{}
	proc.Stderr = logs
	require.NoError(t, proc.Start())
	exited := make(chan error, 1)
	go func() { exited <- proc.Wait() }()
	t.Cleanup(func() { _ = proc.Process.Kill() })

	st := waitStatus(t, state, func(st routetable.Status) bool { return st.AdminAddr != "" && len(st.Listeners) > 0 })
	httpAddr := st.Listeners[0].Addr

	started := make(chan struct{})
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		time.Sleep(700 * time.Millisecond)
		_, _ = io.WriteString(w, "finished")
	}))
	t.Cleanup(be.Close)
	table := routetable.Table{Schema: routetable.Schema, Generation: 1, Graph: routetable.Graph{HTTP: []routetable.HTTPRoute{{
		Host: "app.test", App: "app", Service: "web",
		Backends: []routetable.Backend{{Addr: be.Listener.Addr().String(), Container: "c1"}},
	}}}}
	data, err := json.Marshal(table)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "edge", "routes.json"), data, 0o600))
	waitStatus(t, state, func(st routetable.Status) bool { return st.AppliedGeneration == 1 })

	type result struct {
		code int
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/", nil)
		req.Host = "app.test"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		res <- result{resp.StatusCode, string(b), err}
	}()
	<-started
	require.NoError(t, proc.Process.Signal(syscall.SIGTERM))

	r := <-res
	require.NoError(t, r.err, logs.String())
	assert.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, "finished", r.body)
	select {
	case err := <-exited:
		assert.NoError(t, err, logs.String())
	case <-time.After(5 * time.Second):
		t.Fatalf("gordon-edge did not exit after SIGTERM; logs:\n%s", logs.String())
	}
}

func waitStatus(t *testing.T, state string, ok func(routetable.Status) bool) routetable.Status {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var st routetable.Status
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(filepath.Join(state, "edge", "status.json")); err == nil && json.Unmarshal(data, &st) == nil && ok(st) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("status.json never matched; last %+v", st)
	return st
}

// lockedBuffer collects the child's stderr; exec copies into it from its own
// goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Issue 5 item 3: a bad --trusted-proxies entry is refused before the edge
// binds anything, naming the entry.
func TestIssue5_GordonEdgeRejectsBadTrustedProxies(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"run", "--state-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--trusted-proxies", "10.0.0.0/8,not-an-ip"})
	err := cmd.Execute()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--trusted-proxies")
	assert.Contains(t, err.Error(), `"not-an-ip"`)
}

// R61 (edge signals): SIGHUP re-reads the route table and the edge keeps
// serving, a request in flight included; SIGTERM then drains. The new table
// is written in place with the old one's size and mtime, so a stat poll
// cannot see it (only the 2 s fallback re-read would): applying it within
// a second proves the signal caused the read.
func TestR61_GordonEdgeSIGHUPRereadsTableSIGTERMDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "gordon-edge")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	state := t.TempDir()
	proc := exec.Command(bin, "run", "--state-dir", state, "--http-addr", "127.0.0.1:0", "--shutdown-timeout", "5s")
	logs := &lockedBuffer{}
	proc.Stderr = logs
	require.NoError(t, proc.Start())
	exited := make(chan error, 1)
	go func() { exited <- proc.Wait() }()
	t.Cleanup(func() { _ = proc.Process.Kill() })
	st := waitStatus(t, state, func(st routetable.Status) bool { return st.AdminAddr != "" && len(st.Listeners) > 0 })
	httpAddr := st.Listeners[0].Addr

	started := make(chan struct{}, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			time.Sleep(700 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "finished")
	}))
	t.Cleanup(be.Close)
	tableFor := func(gen uint64, host string) []byte {
		data, err := json.Marshal(routetable.Table{Schema: routetable.Schema, Generation: gen, Graph: routetable.Graph{HTTP: []routetable.HTTPRoute{{
			Host: host, App: "app", Service: "web",
			Backends: []routetable.Backend{{Addr: be.Listener.Addr().String(), Container: "c1"}},
		}}}})
		require.NoError(t, err)
		return data
	}
	routes := filepath.Join(state, "edge", "routes.json")
	require.NoError(t, os.WriteFile(routes, tableFor(1, "one.test"), 0o600))
	waitStatus(t, state, func(st routetable.Status) bool { return st.AppliedGeneration == 1 })
	fi, err := os.Stat(routes)
	require.NoError(t, err)

	get := func(host, path string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	type result struct {
		code int
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() { c, b, err := get("one.test", "/slow"); res <- result{c, b, err} }()
	<-started

	// Same size, same inode, same mtime: invisible to the stat poll.
	next := tableFor(2, "two.test")
	require.Len(t, next, int(fi.Size()))
	f, err := os.OpenFile(routes, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(next, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Chtimes(routes, fi.ModTime(), fi.ModTime()))
	time.Sleep(200 * time.Millisecond) // more than one poll interval
	require.NoError(t, proc.Process.Signal(syscall.SIGHUP))
	deadline := time.Now().Add(time.Second)
	for {
		st := readStatusFile(state)
		if st.AppliedGeneration == 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "SIGHUP did not re-read the table within 1s (applied %d); logs:\n%s", st.AppliedGeneration, logs.String())
		time.Sleep(10 * time.Millisecond)
	}
	r := <-res
	require.NoError(t, r.err, logs.String())
	assert.Equal(t, http.StatusOK, r.code, "the request in flight at SIGHUP completes")
	assert.Equal(t, "finished", r.body)
	code, _, err := get("two.test", "/")
	require.NoError(t, err, "the edge still serves after SIGHUP")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, logs.String(), "SIGHUP")

	// SIGTERM drains: a request in flight finishes, then the edge exits 0.
	go func() { c, b, err := get("two.test", "/slow"); res <- result{c, b, err} }()
	<-started
	require.NoError(t, proc.Process.Signal(syscall.SIGTERM))
	r = <-res
	require.NoError(t, r.err, logs.String())
	assert.Equal(t, http.StatusOK, r.code)
	select {
	case err := <-exited:
		assert.NoError(t, err, logs.String())
	case <-time.After(5 * time.Second):
		t.Fatalf("gordon-edge did not exit after SIGTERM; logs:\n%s", logs.String())
	}
}

func readStatusFile(state string) routetable.Status {
	var st routetable.Status
	data, err := os.ReadFile(filepath.Join(state, "edge", edgestate.StatusFile))
	if err == nil {
		_ = json.Unmarshal(data, &st)
	}
	return st
}
