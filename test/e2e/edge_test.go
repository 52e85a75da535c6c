package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// edgeProc is a foreground gordon-edge serving one test's state directory.
type edgeProc struct {
	HTTPAddr string
	cmd      *exec.Cmd
	stopOnce sync.Once
	stopFn   func()
}

// stop stops the edge (SIGINT, then SIGKILL after 5 s); also done at
// cleanup.
func (e *edgeProc) stop(t testing.TB) {
	t.Helper()
	e.stopOnce.Do(e.stopFn)
}

// freeAddr returns a free 127.0.0.1:port.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// startEdge runs `gordon-edge run` for stateDir until the test ends.
func startEdge(t testing.TB, stateDir string) *edgeProc {
	t.Helper()
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(t.TempDir(), "edge.log"))
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(binDir, "gordon-edge"), "run", "--state-dir", stateDir, "--http-addr", addr, "--admin-addr", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	e := &edgeProc{HTTPAddr: addr, cmd: cmd}
	e.stopFn = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
		}
	}
	t.Cleanup(func() {
		e.stopOnce.Do(e.stopFn)
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("gordon-edge log:\n%s", lastLines(string(b), 40))
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return e
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("gordon-edge did not listen on %s", addr)
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// get fetches path through the edge with Host host.
func (e *edgeProc) get(host, path string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+e.HTTPAddr+path, nil)
	req.Host = host
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// managed lists the containers of app (and service, if given), any state.
func managed(t testing.TB, app, service string) []string {
	t.Helper()
	args := []string{"ps", "-aq", "--no-trunc", "--filter", "label=dev.gordon.app=" + app}
	if service != "" {
		args = append(args, "--filter", "label=dev.gordon.service="+service)
	}
	out, err := exec.Command("docker", args...).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// cleanupApp removes every container of app (volumes too) when the test ends.
func cleanupApp(t testing.TB, app string) {
	t.Cleanup(func() {
		ids := managed(t, app, "")
		if len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
		out, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=dev.gordon.app="+app).Output()
		for _, v := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "volume", "rm", "-f", v).Run()
		}
		out, _ = exec.Command("docker", "network", "ls", "-q", "--filter", "label=dev.gordon.app="+app).Output()
		for _, n := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "network", "rm", n).Run()
		}
	})
}

// dockerEvents collects `docker events` for app's containers.
type dockerEvents struct {
	cancel context.CancelFunc
	done   chan struct{}
	events []dockerEvent
}

type dockerEvent struct {
	Status string `json:"status"`
	ID     string `json:"id"`
	Time   int64  `json:"timeNano"`
	Actor  struct {
		Attributes map[string]string `json:"Attributes"`
	} `json:"Actor"`
}

func watchEvents(t testing.TB, app string) *dockerEvents {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "docker", "events", "--format", "{{json .}}", "--filter", "type=container", "--filter", "label=dev.gordon.app="+app)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	d := &dockerEvents{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		dec := json.NewDecoder(out)
		for {
			var ev dockerEvent
			if err := dec.Decode(&ev); err != nil {
				_ = cmd.Wait()
				return
			}
			d.events = append(d.events, ev)
		}
	}()
	time.Sleep(300 * time.Millisecond) // let the subscription start
	return d
}

// Stop ends the watch (after a short settle) and returns the events.
func (d *dockerEvents) Stop() []dockerEvent {
	time.Sleep(500 * time.Millisecond)
	d.cancel()
	<-d.done
	return d.events
}

// put sends a PUT through the edge.
func (e *edgeProc) put(host, path, body string) error {
	req, _ := http.NewRequest(http.MethodPut, "http://"+e.HTTPAddr+path, strings.NewReader(body))
	req.Host = host
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("PUT %s: %s", path, resp.Status)
	}
	return nil
}
