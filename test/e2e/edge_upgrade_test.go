package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/loadgen"
)

// dockerInspect returns `docker inspect` of name (nil when absent).
func dockerInspect(name string) map[string]any {
	out, err := exec.Command("docker", "inspect", name).Output()
	if err != nil {
		return nil
	}
	var v []map[string]any
	if json.Unmarshal(out, &v) != nil || len(v) == 0 {
		return nil
	}
	return v[0]
}

// R60 (edge upgrade drops nothing): `edge start` with a rebuilt gordon-edge
// binary while 16 clients (half keep-alive, half a new connection per
// request) and one SSE stream run: the new edge container starts beside
// the old one, takes its listeners over, the old one drains and is
// removed, the new one is renamed gordon-edge; no request fails and the
// SSE stream continues until the drain bound, where it ends.
func TestR60_EdgeUpgradeUnderLoadDropsNothing(t *testing.T) {
	for _, n := range []string{"gordon-edge", "gordon-edge-next"} {
		if dockerInspect(n) != nil {
			t.Skipf("container %s exists on this engine; not touching it", n)
		}
	}
	// A second build of gordon-edge: another binary, another image.
	bin2 := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version=e2e-next", "-o", filepath.Join(bin2, "gordon-edge"), "./cmd/gordon-edge")
	build.Dir = fixture.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	state := t.TempDir()
	httpAddr, adminAddr := fixture.FreeAddr(t), fixture.FreeAddr(t)
	const drain = 4 * time.Second
	var images []string // the edge images this test built
	t.Cleanup(func() {
		r := fixture.GordonPath(t, state, fixture.BinDir(), "edge", "stop")
		if r.Code != 0 {
			t.Logf("edge stop: %s", r)
		}
		if c := dockerInspect("gordon-edge-next"); c != nil && strings.Contains(fmt.Sprint(c["Mounts"]), state) {
			_ = exec.Command("docker", "rm", "-f", "gordon-edge-next").Run()
		}
		for _, id := range images {
			_ = exec.Command("docker", "rmi", id).Run()
		}
	})

	// The backend: "/" answers, "/sse" sends an event every 50 ms.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	be := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = be.Serve(ln) }()
	t.Cleanup(func() { _ = be.Close() })
	table := routetable.Table{Schema: routetable.Schema, Generation: 1, Graph: routetable.Graph{HTTP: []routetable.HTTPRoute{{
		Host: "app.test", App: "app", Service: "web",
		Backends: []routetable.Backend{{Addr: ln.Addr().String(), Container: "c1"}},
	}}}}
	data, err := json.Marshal(table)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(state, "edge"), 0o700))
	require.NoError(t, edgestate.WriteFileAtomic(filepath.Join(state, "edge", edgestate.RoutesFile), data))

	// --watch=false: the route table above is written by hand, with no
	// journal behind it, and a watcher's first pass would republish the
	// journal's (empty) routes over it.
	r := fixture.GordonPath(t, state, fixture.BinDir(), "edge", "start", "--watch=false", "--http-addr", httpAddr, "--admin-addr", adminAddr, "--drain-timeout", drain.String())
	require.Equal(t, 0, r.Code, "%s", r)
	first := dockerInspect("gordon-edge")
	require.NotNil(t, first)
	images = append(images, first["Image"].(string))
	get := func(c *http.Client, path string) error {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+path, nil)
		req.Host = "app.test"
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	require.Eventually(t, func() bool { return get(http.DefaultClient, "/") == nil }, 20*time.Second, 100*time.Millisecond)

	// The load: 16 clients, half keep-alive, half a new connection per
	// request; anything but 200 fails.
	l, err := loadgen.StartHTTP(loadgen.HTTPConfig{URL: "http://" + httpAddr + "/", Host: "app.test", Clients: 16,
		NewClient: func(i int) *http.Client {
			return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: i%2 == 1}}
		},
		Label: func(i int) string { return map[bool]string{false: "keep-alive", true: "new-connection"}[i%2 == 1] },
		Check: func(_ int, resp *http.Response) error {
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		},
		MaxErrors: 1, Bounds: loadgen.Bounds{MaxRequests: 1_000_000}})
	require.NoError(t, err)
	t.Cleanup(func() { l.Stop() })
	req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/sse", nil)
	req.Host = "app.test"
	sse, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer sse.Body.Close()
	var sseLast atomic.Int64
	sseEnd := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(sse.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				sseLast.Store(time.Now().UnixNano())
			}
		}
		sseEnd <- sc.Err()
	}()
	require.Eventually(t, func() bool { return sseLast.Load() != 0 }, 10*time.Second, 20*time.Millisecond, "the event stream sends")
	waitMoreAnswers(t, l.Snapshot, 100)

	t0 := time.Now()
	r = fixture.GordonPath(t, state, bin2, "edge", "start", "--watch=false", "--http-addr", httpAddr, "--admin-addr", adminAddr, "--drain-timeout", drain.String())
	upgradeTook := time.Since(t0)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "listeners handed over")
	waitMoreAnswers(t, l.Snapshot, 200) // load on the new edge alone
	load := l.Stop()

	second := dockerInspect("gordon-edge")
	require.NotNil(t, second, "the new edge is named gordon-edge")
	images = append(images, second["Image"].(string))
	assert.NotEqual(t, first["Id"], second["Id"])
	assert.NotEqual(t, first["Image"], second["Image"], "the rebuilt binary is another image")
	assert.Nil(t, dockerInspect("gordon-edge-next"))
	assert.Nil(t, dockerInspect(first["Id"].(string)), "the old edge is removed")
	assert.Equal(t, "unless-stopped", second["HostConfig"].(map[string]any)["RestartPolicy"].(map[string]any)["Name"])

	// The SSE stream stayed on the old edge until the drain bound.
	select {
	case <-sseEnd:
	case <-time.After(5 * time.Second):
		t.Fatal("the SSE stream did not end although the old edge is gone")
	}
	sseFor := time.Unix(0, sseLast.Load()).Sub(t0)
	assert.Greater(t, sseFor, drain-time.Second, "the SSE stream continued until the drain bound")

	t.Logf("edge upgrade: %d requests (answered per client kind %v), %d failed, longest gap between a client's answers %v, upgrade took %v, SSE ran %v into it",
		load.Requests(), load.ByLabel, load.Failed(), load.LongestClientGap.Round(time.Millisecond), upgradeTook.Round(time.Millisecond), sseFor.Round(time.Millisecond))
	assert.Zero(t, load.Failed(), "failed requests (first: %v)", load.Errors)
	require.NoError(t, get(http.DefaultClient, "/"), "the new edge serves")

	// An upgrade whose new edge cannot start (its admin address is taken)
	// changes nothing: the running edge keeps serving, with its restart
	// policy back, and no gordon-edge-next is left.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	r = fixture.GordonPath(t, state, fixture.BinDir(), "edge", "start", "--watch=false", "--http-addr", httpAddr, "--admin-addr", busy.Addr().String(), "--drain-timeout", drain.String())
	assert.NotEqual(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "keeps serving")
	third := dockerInspect("gordon-edge")
	require.NotNil(t, third)
	assert.Equal(t, second["Id"], third["Id"])
	assert.Equal(t, true, third["State"].(map[string]any)["Running"])
	assert.Equal(t, "unless-stopped", third["HostConfig"].(map[string]any)["RestartPolicy"].(map[string]any)["Name"])
	assert.Nil(t, dockerInspect("gordon-edge-next"))
	require.NoError(t, get(http.DefaultClient, "/"), "the running edge still serves")
}
