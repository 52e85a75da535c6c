package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
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

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
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
	e := startEdgeBinary(t)
	e.publish(t, 1, "app.test")

	res := e.getAsync("app.test", "/slow")
	<-e.started
	require.NoError(t, e.proc.Process.Signal(syscall.SIGTERM))

	r := <-res
	require.NoError(t, r.err, e.logs.String())
	assert.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, "finished", r.body)
	e.requireExit0(t)
}

// edgeProc is a gordon-edge binary a test runs on its own state directory,
// with one backend.
type edgeProc struct {
	state     string
	httpAddr  string
	adminAddr string
	proc      *exec.Cmd
	logs      *lockedBuffer
	exited    chan error
	backend   *httptest.Server
	// started receives when a request to the backend's /slow arrives.
	started chan struct{}
}

// startEdgeBinary builds gordon-edge (skipped with -short), runs it with a
// 5 s shutdown timeout until the test ends, waits for status.json to show
// its listeners, and starts the backend: it answers "finished", on /slow
// after 700 ms. extra are more arguments of run.
func startEdgeBinary(t *testing.T, extra ...string) *edgeProc {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "gordon-edge")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	e := &edgeProc{state: t.TempDir(), logs: &lockedBuffer{}, exited: make(chan error, 1), started: make(chan struct{}, 1)}
	e.proc = exec.Command(bin, append([]string{"run", "--state-dir", e.state, "--http-addr", "127.0.0.1:0", "--shutdown-timeout", "5s"}, extra...)...)
	e.proc.Stderr = e.logs
	require.NoError(t, e.proc.Start())
	go func() { e.exited <- e.proc.Wait() }()
	t.Cleanup(func() { _ = e.proc.Process.Kill() })
	st := waitStatus(t, e.state, func(st routetable.Status) bool { return st.AdminAddr != "" && len(st.Listeners) > 0 })
	e.httpAddr, e.adminAddr = st.Listeners[0].Addr, st.AdminAddr

	e.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			e.started <- struct{}{}
			// In flight for a span that the signal lands in: the edge
			// reports no event for "draining" that a release could await.
			time.Sleep(700 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "finished")
	}))
	t.Cleanup(e.backend.Close)
	return e
}

// table is the route table of generation gen routing host to the backend.
func (e *edgeProc) table(t *testing.T, gen uint64, host string) []byte {
	t.Helper()
	data, err := json.Marshal(routetable.Table{Schema: routetable.Schema, Generation: gen, Graph: routetable.Graph{HTTP: []routetable.HTTPRoute{{
		Host: host, App: "app", Service: "web",
		Backends: []routetable.Backend{{Addr: e.backend.Listener.Addr().String(), Container: "c1"}},
	}}}})
	require.NoError(t, err)
	return data
}

// publish writes table(gen, host) as routes.json, waits until the edge
// applied it and returns the file's path.
func (e *edgeProc) publish(t *testing.T, gen uint64, host string) string {
	t.Helper()
	routes := filepath.Join(e.state, "edge", "routes.json")
	require.NoError(t, os.WriteFile(routes, e.table(t, gen, host), 0o600))
	waitStatus(t, e.state, func(st routetable.Status) bool { return st.AppliedGeneration == gen })
	return routes
}

// get sends GET path for host to the edge and reads the whole answer.
func (e *edgeProc) get(host, path string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+e.httpAddr+path, nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// getResult is the outcome of a get run in the background.
type getResult struct {
	code int
	body string
	err  error
}

// getAsync runs get in the background; its outcome arrives on the channel.
func (e *edgeProc) getAsync(host, path string) <-chan getResult {
	res := make(chan getResult, 1)
	go func() { c, b, err := e.get(host, path); res <- getResult{c, b, err} }()
	return res
}

// requireExit0 waits up to 5 s for the edge to exit, and expects exit 0.
func (e *edgeProc) requireExit0(t *testing.T) {
	t.Helper()
	select {
	case err := <-e.exited:
		assert.NoError(t, err, e.logs.String())
	case <-time.After(5 * time.Second):
		t.Fatalf("gordon-edge did not exit after SIGTERM; logs:\n%s", e.logs.String())
	}
}

func waitStatus(t *testing.T, state string, ok func(routetable.Status) bool) routetable.Status {
	t.Helper()
	var st routetable.Status
	if assert.Eventually(t, func() bool {
		var cur routetable.Status
		data, err := os.ReadFile(filepath.Join(state, "edge", "status.json"))
		if err != nil || json.Unmarshal(data, &cur) != nil || !ok(cur) {
			return false
		}
		st = cur
		return true
	}, 5*time.Second, 20*time.Millisecond) {
		return st
	}
	t.Fatalf("status.json never matched; last %+v", readStatusFile(state))
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

// A bad --trusted-proxies entry is refused before the edge
// binds anything, naming the entry.
func TestGordonEdgeRejectsBadTrustedProxies(t *testing.T) {
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
	e := startEdgeBinary(t)
	routes := e.publish(t, 1, "one.test")
	fi, err := os.Stat(routes)
	require.NoError(t, err)

	res := e.getAsync("one.test", "/slow")
	<-e.started

	// Same size, same inode, same mtime: invisible to the stat poll.
	next := e.table(t, 2, "two.test")
	require.Len(t, next, int(fi.Size()))
	f, err := os.OpenFile(routes, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(next, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Chtimes(routes, fi.ModTime(), fi.ModTime()))
	// More than one poll interval passes without the change being seen.
	assert.Never(t, func() bool { return readStatusFile(e.state).AppliedGeneration == 2 }, 200*time.Millisecond, 10*time.Millisecond,
		"the stat poll saw a change that keeps size, inode and mtime")
	require.NoError(t, e.proc.Process.Signal(syscall.SIGHUP))
	if !assert.Eventually(t, func() bool { return readStatusFile(e.state).AppliedGeneration == 2 }, time.Second, 10*time.Millisecond) {
		t.Fatalf("SIGHUP did not re-read the table within 1s (applied %d); logs:\n%s", readStatusFile(e.state).AppliedGeneration, e.logs.String())
	}
	r := <-res
	require.NoError(t, r.err, e.logs.String())
	assert.Equal(t, http.StatusOK, r.code, "the request in flight at SIGHUP completes")
	assert.Equal(t, "finished", r.body)
	code, _, err := e.get("two.test", "/")
	require.NoError(t, err, "the edge still serves after SIGHUP")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, e.logs.String(), "SIGHUP")

	// SIGTERM drains: a request in flight finishes, then the edge exits 0.
	res = e.getAsync("two.test", "/slow")
	<-e.started
	require.NoError(t, e.proc.Process.Signal(syscall.SIGTERM))
	r = <-res
	require.NoError(t, r.err, e.logs.String())
	assert.Equal(t, http.StatusOK, r.code)
	e.requireExit0(t)
}

func readStatusFile(state string) routetable.Status {
	var st routetable.Status
	data, err := os.ReadFile(filepath.Join(state, "edge", edgestate.StatusFile))
	if err == nil {
		_ = json.Unmarshal(data, &st)
	}
	return st
}

// Route push: the routes token comes from --routes-token-file (trimmed),
// which wins over GORDON_EDGE_ROUTES_TOKEN; an empty or missing file is
// an error, and neither set means no token.
func TestGordonEdgeRoutesTokenFileWinsOverEnv(t *testing.T) {
	t.Setenv(routesTokenEnv, "from-env")
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte("from-file\n"), 0o600))
	tok, err := routesToken(file)
	require.NoError(t, err)
	assert.Equal(t, "from-file", tok)
	tok, err = routesToken("")
	require.NoError(t, err)
	assert.Equal(t, "from-env", tok)

	require.NoError(t, os.WriteFile(file, []byte(" \n"), 0o600))
	_, err = routesToken(file)
	assert.ErrorContains(t, err, "empty")
	_, err = routesToken(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorContains(t, err, "--routes-token-file")

	t.Setenv(routesTokenEnv, "")
	tok, err = routesToken("")
	require.NoError(t, err)
	assert.Empty(t, tok)
}

// Route push: --peers without a routes token, a non-loopback --admin-addr
// without one and --cert-storage without one are refused, naming
// --routes-token-file.
func TestGordonEdgePeersAndNonLoopbackAdminNeedTheToken(t *testing.T) {
	t.Setenv(routesTokenEnv, "")
	for _, args := range [][]string{
		{"--peers", "tasks.gordon-edge"},
		{"--admin-addr", "0.0.0.0:0"},
		{"--cert-storage", "http://gordon-reconcile:9190"},
	} {
		cmd := newRootCommand()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"run", "--state-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--access-log", "off", "--no-handover"}, args...))
		err := cmd.Execute()
		require.Error(t, err, "%v", args)
		assert.Contains(t, err.Error(), "--routes-token-file")
	}
}

// A --cert-storage that is not an http(s) URL is refused at start,
// naming the flag.
func TestGordonEdgeCertStorageMustBeAnHTTPURL(t *testing.T) {
	t.Setenv(routesTokenEnv, "tok")
	cmd := newRootCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"run", "--state-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--access-log", "off", "--no-handover", "--cert-storage", "gordon-reconcile:9190"})
	err := cmd.Execute()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--cert-storage")
}

// Route push: the binary with --routes-token-file binds a non-loopback
// admin address and applies a table PUT to /routes with the file's token
// before it answers.
func TestGordonEdgeRoutesPushedWithTheTokenFile(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("bin-token\n"), 0o600))
	e := startEdgeBinary(t, "--admin-addr", "0.0.0.0:0", "--routes-token-file", tokenFile)
	_, port, err := net.SplitHostPort(e.adminAddr)
	require.NoError(t, err)
	put := func(token string) int {
		req, err := http.NewRequest(http.MethodPut, "http://127.0.0.1:"+port+"/routes", bytes.NewReader(e.table(t, 1, "bin.test")))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, put("wrong"))
	require.Equal(t, http.StatusOK, put("bin-token"), e.logs.String())
	code, body, err := e.get("bin.test", "/")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "finished", body)
}

// gordon-edge run makes <state>/edge/admin.token (0600) at its first start
// and keeps it across restarts; the admin endpoint on loopback answers
// POST /reload and GET /status only with it, GET /healthz to anyone.
func TestGordonEdgeAdminNeedsTheStateDirectoryToken(t *testing.T) {
	e := startEdgeBinary(t)
	path := filepath.Join(e.state, "edge", edgestate.AdminTokenFile)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	tok, err := edgestate.ReadAdminToken(filepath.Join(e.state, "edge"))
	require.NoError(t, err)
	assert.Len(t, tok, 64)
	do := func(method, path, token string) int {
		req, err := http.NewRequest(method, "http://"+e.adminAddr+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, do(http.MethodPost, "/reload", ""))
	assert.Equal(t, http.StatusUnauthorized, do(http.MethodGet, "/status", ""))
	assert.Equal(t, http.StatusOK, do(http.MethodPost, "/reload", tok))
	assert.Equal(t, http.StatusOK, do(http.MethodGet, "/status", tok))
	assert.Equal(t, http.StatusOK, do(http.MethodGet, "/healthz", ""))

	again, err := edgestate.EnsureAdminToken(filepath.Join(e.state, "edge"))
	require.NoError(t, err)
	assert.Equal(t, tok, again, "the token stays")
}
