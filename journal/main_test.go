package journal

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// The test binary doubles as a helper process (re-exec with
// JOURNAL_TEST_HELPER set) for the crash and cross-process lock tests.
const (
	envHelper = "JOURNAL_TEST_HELPER"
	envDir    = "JOURNAL_TEST_DIR"
	envHold   = "JOURNAL_TEST_HOLD"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envHelper) {
	case "writer":
		os.Exit(helperWriter())
	case "locker":
		os.Exit(helperLocker())
	}
	os.Exit(m.Run())
}

// helperWriter rewrites active.json of app "blog" with B, A, B, A… until
// killed; it prints "ready" once the store is open.
func helperWriter() int {
	s, err := Open(os.Getenv(envDir))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	a, b := crashRecord("A"), crashRecord("B")
	ctx := context.Background()
	fmt.Println("ready")
	for i := 0; ; i++ {
		rec := a
		if i%2 == 0 {
			rec = b
		}
		if err := s.SaveActive(ctx, rec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
}

// helperLocker takes the lock of app "blog" as (deploy, op-child), prints
// "locked", holds it for JOURNAL_TEST_HOLD ("forever": until killed), then
// unlocks and prints "unlocked".
func helperLocker() int {
	s, err := Open(os.Getenv(envDir))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := s.Lock(context.Background(), "blog", core.LockHolder{Verb: "deploy", Op: "op-child"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	if h := os.Getenv(envHold); h == "forever" {
		select {}
	} else {
		d, _ := time.ParseDuration(h)
		time.Sleep(d) // the child holds the lock for the span the test asked for

	}
	if err := l.Unlock(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("unlocked")
	return 0
}

// crashRecord is a large ACTIVE (tens of KB, several pages) whose every
// service carries the tag, so a torn or mixed file cannot pass as A or B.
func crashRecord(tag string) core.Active {
	a := core.Active{App: "blog", Converged: true, ConvergedRevision: "rev-" + tag, Services: map[string]*core.ActiveService{}}
	for i := 0; i < 60; i++ {
		a.Services[fmt.Sprintf("svc-%02d", i)] = &core.ActiveService{
			EffectiveRevision: "rev-" + tag,
			Container:         strings.Repeat(tag, 64),
			Image:             "img-" + tag + strings.Repeat("x", 200),
			BackendBinds:      map[int]int{8080: 18000 + i},
		}
	}
	return a
}

// helper is a started helper process with its stdout lines.
type helper struct {
	cmd   *exec.Cmd
	lines chan string
}

func startHelper(t *testing.T, kind, dir string, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{envHelper + "=" + kind, envDir + "=" + dir}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	h := &helper{cmd: cmd, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		close(h.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return h
}

// expect waits for the helper to print want.
func (h *helper) expect(t *testing.T, want string, within time.Duration) {
	t.Helper()
	select {
	case l, ok := <-h.lines:
		require.True(t, ok, "helper exited before printing %q", want)
		require.Equal(t, want, l)
	case <-time.After(within):
		t.Fatalf("helper did not print %q within %s", want, within)
	}
}

// kill9 sends SIGKILL and reaps the helper.
func (h *helper) kill9(t *testing.T) {
	t.Helper()
	require.NoError(t, h.cmd.Process.Kill())
	_ = h.cmd.Wait()
}
