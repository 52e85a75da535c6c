package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The dashboard's e2e tests drive Debian's chromium headless with
// chromedp (the Chrome DevTools Protocol from Go: waits on the DOM and
// key presses a --dump-dom run cannot do).

// browser starts headless chromium for the test (closed at its end) and
// returns its context.
func browser(t *testing.T) context.Context {
	t.Helper()
	exe, err := exec.LookPath("chromium")
	require.NoError(t, err, "the dashboard e2e needs Debian's chromium (apt-get install chromium; .ci/run installs it)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	require.NoError(t, chromedp.Do(bctx), "start chromium")
	return bctx
}

// do runs browser steps, bounded by 30 s.
func do(t *testing.T, bctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// value runs one browser action that returns a value, bounded by 30 s.
func value[T any](t *testing.T, bctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

// try runs one browser action that returns a value, bounded by 5 s, for
// a poll (an error is the zero value).
func try[T any](bctx context.Context, a chromedp.Action[T]) T {
	ctx, cancel := context.WithTimeout(bctx, 5*time.Second)
	defer cancel()
	v, _ := chromedp.Run(ctx, a)
	return v
}

// artifactDir is where the dashboard's screenshots go:
// $GORDON_E2E_ARTIFACTS/dashboard, else test/e2e/artifacts/dashboard in
// the repository (git-ignored).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GORDON_E2E_ARTIFACTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "artifacts")
	}
	dir = filepath.Join(dir, "dashboard")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// screenshot writes the whole page as NAME.png in the artifact directory.
func screenshot(t *testing.T, bctx context.Context, name string) {
	t.Helper()
	png := value(t, bctx, chromedp.FullScreenshot(100))
	p := filepath.Join(artifactDir(t), name+".png")
	require.NoError(t, os.WriteFile(p, png, 0o644))
	t.Logf("screenshot %s (%d bytes)", p, len(png))
}

// dashboardProc is a running `docker gordon dashboard`.
type dashboardProc struct {
	cmd  *exec.Cmd
	addr string
	errb fmt.Stringer
}

// startDashboard runs cmd (a dashboard on addr) until the test ends, and
// waits for its apps page (bound: wait).
func startDashboard(t *testing.T, cmd *exec.Cmd, errb fmt.Stringer, addr string, wait time.Duration, hdr ...string) *dashboardProc {
	t.Helper()
	require.NoError(t, cmd.Start())
	d := &dashboardProc{cmd: cmd, addr: addr, errb: errb}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("dashboard stderr:\n%s", errb)
		}
	})
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, wait, 100*time.Millisecond, "the dashboard did not answer on %s", addr)
	return d
}

// rssKiB is the process's resident memory (VmRSS) in KiB.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// darkScheme makes the page prefer the dark color scheme.
func darkScheme() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	})
}
