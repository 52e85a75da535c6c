package sdk

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// testPluginBin is plugins/sdk/internal/testplugin, built once by TestMain;
// testPluginDir holds it under gordon-<kind>-<mode> names.
var testPluginBin, testPluginDir string

// envHostHelper makes the test binary act as a plugin host that prints its
// plugin's PID and then waits to be killed (TestArch1_PluginDiesWithHost).
const envHostHelper = "GORDON_SDK_TEST_HOST_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envHostHelper); dir != "" {
		hostHelper(dir)
		return
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "gordon-sdk-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	testPluginBin = filepath.Join(tmp, "testplugin")
	build := exec.Command("go", "build", "-o", testPluginBin, "./internal/testplugin")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building testplugin: %v\n%s", err, out)
		return 1
	}
	testPluginDir = filepath.Join(tmp, "plugins")
	if err := os.Mkdir(testPluginDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, kind := range Kinds() {
		for _, mode := range []string{"fake", "sleepy", "garbage", "crash", "v2"} {
			if err := os.Symlink(testPluginBin, filepath.Join(testPluginDir, "gordon-"+kind+"-"+mode)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	}
	return m.Run()
}

// hostHelper starts runtime/fake from dir, prints its PID, and blocks.
func hostHelper(dir string) {
	h, err := NewHost(HostConfig{PluginDirs: []string{dir}, StartTimeout: 10 * time.Second})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	info, err := h.Describe(context.Background(), KindRuntime, "fake")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(info.PID)
	select {}
}

func newTestHost(t testing.TB, cfg HostConfig) *Host {
	t.Helper()
	if cfg.PluginDirs == nil {
		cfg.PluginDirs = []string{testPluginDir}
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: hclog.DefaultOutput, Level: hclog.Warn})
	}
	h, err := NewHost(cfg)
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h
}

// processGone reports whether pid no longer runs (absent or a zombie).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// Field 3 (after "pid (comm) ") is the state.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	if !assert.Eventually(t, func() bool { return processGone(pid) }, within, 20*time.Millisecond) {
		t.Fatalf("plugin process %d still running after %s", pid, within)
	}
}

// ARCHITECTURE §1: a custom plugin is launched from the plugin path and
// answers Describe with its identity and protocol version.
func TestArch1_CustomPluginDescribes(t *testing.T) {
	h := newTestHost(t, HostConfig{})
	for _, kind := range Kinds() {
		info, err := h.Describe(context.Background(), kind, "fake")
		require.NoError(t, err, kind)
		assert.Equal(t, kind, info.Kind)
		assert.Equal(t, "fake", info.Name)
		assert.Equal(t, ProtocolVersion, info.ProtocolVersion)
		assert.Equal(t, "test", info.Version)
		assert.NotZero(t, info.PID)
		assert.NotEqual(t, os.Getpid(), info.PID, "a subprocess, not the host")
		assert.Equal(t, info.PID, h.PID(kind, "fake"))
	}
}

// The host caches one process per kind/name and hands out working clients.
func TestArch1_PluginIsStartedOnceAndCached(t *testing.T) {
	h := newTestHost(t, HostConfig{})
	ctx := context.Background()
	rt1, err := h.Runtime(ctx, "fake")
	require.NoError(t, err)
	pid := h.PID(KindRuntime, "fake")
	rt2, err := h.Runtime(ctx, "fake")
	require.NoError(t, err)
	assert.Same(t, rt1, rt2)
	assert.Equal(t, pid, h.PID(KindRuntime, "fake"))

	_, err = rt1.ResolveImage(ctx, "nope:1")
	assert.ErrorIs(t, err, core.ErrNotFound, "class survives a real subprocess")
	p, err := h.Probe(ctx, "fake")
	require.NoError(t, err)
	res, err := p.Check(ctx, core.ProbeRequest{})
	require.NoError(t, err)
	assert.True(t, res.Ready)
	tr, err := h.Traffic(ctx, "fake")
	require.NoError(t, err)
	gen, err := tr.Apply(ctx, routetableGraph())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), gen)
}

// Built-ins re-execute SelfExe with GORDON_PLUGIN=<kind>/<name>, the
// configured Env and an existing TMPDIR.
func TestArch1_BuiltinIsReexecutedWithEnv(t *testing.T) {
	h := newTestHost(t, HostConfig{
		SelfExe:    testPluginBin,
		Builtins:   []string{"runtime/builtin"},
		PluginDirs: []string{},
		Env:        []string{"GORDON_TEST_ENV=from-host-config"},
	})
	rt, err := h.Runtime(context.Background(), "builtin")
	require.NoError(t, err)
	info, err := rt.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "from-host-config", info.Name)
	assert.Equal(t, "runtime/builtin", info.Arch, "GORDON_PLUGIN names the built-in")
	assert.DirExists(t, info.OS, "TMPDIR must exist for go-plugin's sockets")
}

func TestArch1_UnknownPluginIsNotFound(t *testing.T) {
	h := newTestHost(t, HostConfig{})
	_, err := h.Probe(context.Background(), "missing")
	require.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "probe/missing")
	_, err = h.Describe(context.Background(), "storage", "x")
	assert.ErrorIs(t, err, core.ErrInvalid)
}

// A plugin that never completes the handshake fails within StartTimeout,
// naming the plugin, and is killed.
func TestArch1_SlowHandshakeIsBounded(t *testing.T) {
	h := newTestHost(t, HostConfig{StartTimeout: 500 * time.Millisecond})
	start := time.Now()
	_, err := h.Probe(context.Background(), "sleepy")
	require.Error(t, err)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "probe/sleepy")
	assert.Contains(t, err.Error(), "500ms")
}

// The caller's context also bounds a start.
func TestArch1_StartHonoursCallerContext(t *testing.T) {
	h := newTestHost(t, HostConfig{StartTimeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := h.Runtime(ctx, "sleepy")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "runtime/sleepy")
	assert.Less(t, time.Since(start), 3*time.Second)
}

func TestArch1_GarbageOnStdoutNamesThePlugin(t *testing.T) {
	h := newTestHost(t, HostConfig{})
	_, err := h.Traffic(context.Background(), "garbage")
	require.ErrorIs(t, err, core.ErrPluginExited)
	assert.Contains(t, err.Error(), "traffic/garbage")
	assert.Contains(t, err.Error(), "hello from a plugin")
}

func TestArch1_CrashBeforeHandshakeNamesThePlugin(t *testing.T) {
	h := newTestHost(t, HostConfig{})
	start := time.Now()
	_, err := h.Runtime(context.Background(), "crash")
	require.ErrorIs(t, err, core.ErrPluginExited)
	assert.Contains(t, err.Error(), "runtime/crash")
	assert.Less(t, time.Since(start), 3*time.Second)
}

// ARCHITECTURE §1: a version mismatch is a clear error naming the plugin
// and both versions.
func TestArch1_ProtocolVersionMismatchNamesBothVersions(t *testing.T) {
	h := newTestHost(t, HostConfig{})
	_, err := h.Probe(context.Background(), "v2")
	require.ErrorIs(t, err, core.ErrPluginExited)
	msg := err.Error()
	assert.Contains(t, msg, "probe/v2")
	assert.Contains(t, msg, "version 2")
	assert.Contains(t, msg, "version 1")
}

// Close kills every plugin; later calls fail with ErrUnavailable.
func TestArch1_CloseKillsPlugins(t *testing.T) {
	h := newTestHost(t, HostConfig{})
	info, err := h.Describe(context.Background(), KindProbe, "fake")
	require.NoError(t, err)
	h.Close()
	waitGone(t, info.PID, 5*time.Second)
	_, err = h.Probe(context.Background(), "fake")
	assert.ErrorIs(t, err, core.ErrUnavailable)
}

// A plugin that dies is reported as ErrPluginExited naming it, and the
// next request starts a fresh process.
func TestArch1_DeadPluginIsPluginExitedThenRestarted(t *testing.T) {
	h := newTestHost(t, HostConfig{})
	ctx := context.Background()
	rt, err := h.Runtime(ctx, "fake")
	require.NoError(t, err)
	pid := h.PID(KindRuntime, "fake")
	require.NotZero(t, pid)

	_, err = rt.InspectContainer(ctx, "exit") // the fake exits mid-call
	require.ErrorIs(t, err, core.ErrPluginExited)
	assert.Contains(t, err.Error(), "runtime/fake")
	waitGone(t, pid, 5*time.Second)

	rt2, err := h.Runtime(ctx, "fake")
	require.NoError(t, err)
	st, err := rt2.InspectContainer(ctx, "c1")
	require.NoError(t, err)
	assert.Equal(t, "c1", st.ID)
	assert.NotEqual(t, pid, h.PID(KindRuntime, "fake"))
}

// ARCHITECTURE §1: plugins die with the CLI even after kill -9 (Pdeathsig).
func TestArch1_PluginDiesWithHost(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHostHelper+"="+testPluginDir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "helper said %q", line)
	require.False(t, processGone(pid), "plugin should run while its host runs")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	waitGone(t, pid, 5*time.Second)
}

func BenchmarkPluginStartHandshake(b *testing.B) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		h, err := NewHost(HostConfig{PluginDirs: []string{testPluginDir}, StartTimeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Describe(ctx, KindProbe, "fake"); err != nil {
			b.Fatal(err)
		}
		h.Close()
	}
}

// syncBuffer is a goroutine-safe bytes.Buffer for log capture.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Plugin stderr reaches the host's Logger (the CLI shows it with --debug).
func TestArch1_PluginStderrGoesToHostLogger(t *testing.T) {
	var buf syncBuffer
	h := newTestHost(t, HostConfig{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})})
	_, err := h.Runtime(context.Background(), "crash")
	require.Error(t, err)
	assert.Eventually(t, func() bool { return strings.Contains(buf.String(), "crashing on purpose") },
		2*time.Second, 20*time.Millisecond, "host log: %s", buf.String())
	assert.Contains(t, buf.String(), "runtime/crash")
}

// What plugin code prints after the handshake ends up in the host Logger,
// never on the host's stdout.
func TestArch1_PluginStrayOutputGoesToHostLogger(t *testing.T) {
	var buf syncBuffer
	h := newTestHost(t, HostConfig{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})})
	p, err := h.Probe(context.Background(), "fake")
	require.NoError(t, err)
	_, err = p.Check(context.Background(), core.ProbeRequest{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool {
		s := buf.String()
		return strings.Contains(s, "stray stdout from Check") && strings.Contains(s, "stray stderr from Check")
	}, 3*time.Second, 20*time.Millisecond, "host log: %s", buf.String())
}

// Starting one plugin does not wait behind another plugin's slow start.
func TestArch1_StartsOfDifferentPluginsAreConcurrent(t *testing.T) {
	h := newTestHost(t, HostConfig{StartTimeout: 3 * time.Second})
	slow := make(chan error, 1)
	go func() { _, err := h.Probe(context.Background(), "sleepy"); slow <- err }()
	// Let the slow start take its turn first: the host reports no event
	// for a start begun, so this is an ordering settle.
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	_, err := h.Probe(context.Background(), "fake")
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2500*time.Millisecond, "waited behind probe/sleepy")
	assert.ErrorIs(t, <-slow, core.ErrUnavailable)
}

// Concurrent first calls for one plugin start a single process.
func TestArch1_ConcurrentCallsShareOneProcess(t *testing.T) {
	h := newTestHost(t, HostConfig{})
	var wg sync.WaitGroup
	pids := make([]int, 4)
	for i := range pids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			info, err := h.Describe(context.Background(), KindTraffic, "fake")
			if assert.NoError(t, err) {
				pids[i] = info.PID
			}
		}(i)
	}
	wg.Wait()
	for _, pid := range pids {
		assert.Equal(t, pids[0], pid)
	}
}

// Plugins listen inside a private 0700 directory of the host (the
// protection AutoMTLS gave, without its key generation per start), and the
// directory goes away with the host.
func TestHost_PluginSocketsInPrivateDirectory(t *testing.T) {
	h, err := NewHost(HostConfig{PluginDirs: []string{testPluginDir}, StartTimeout: 5 * time.Second})
	require.NoError(t, err)
	_, err = h.Describe(context.Background(), KindProbe, "fake")
	require.NoError(t, err)
	h.mu.Lock()
	dir := h.sockDir
	h.mu.Unlock()
	require.NotEmpty(t, dir)
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var sockets []os.DirEntry
	for _, e := range entries {
		if e.Name() != ownerFile {
			sockets = append(sockets, e)
		}
	}
	require.Len(t, sockets, 1, "the plugin's socket (beside the owner file)")
	assert.Equal(t, os.ModeSocket, sockets[0].Type()&os.ModeSocket)
	h.Close()
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "socket directory removed at Close")
}

// Close kills plugins outright (they hold no state), and that deliberate
// kill is not reported as an error: a command's output does not end with
// "plugin process exited" lines.
func TestHost_CloseKillsPluginsWithoutErrorLines(t *testing.T) {
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	h, err := NewHost(HostConfig{PluginDirs: []string{testPluginDir}, StartTimeout: 5 * time.Second, Logger: logger})
	require.NoError(t, err)
	_, err = h.Describe(context.Background(), KindProbe, "fake")
	require.NoError(t, err)
	pid := h.PID(KindProbe, "fake")
	require.NotZero(t, pid)
	start := time.Now()
	h.Close()
	assert.Less(t, time.Since(start), time.Second)
	waitGone(t, pid, 2*time.Second)
	assert.NotContains(t, logs.String(), "[ERROR]", "a deliberate kill is no error")
}

// A plugin that never handshakes and whose child holds its stdout open (a
// script running sleep): a start the caller's context ends, and Close, kill
// the plugin's whole process group, so neither the script nor its child is
// left and Close does not wait for the child.
func TestArch1_StalledScriptPluginAndItsChildAreKilled(t *testing.T) {
	dir := t.TempDir()
	marker := fmt.Sprintf("%d.25", 3000+os.Getpid()%1000)
	script := "#!/bin/sh\nsleep " + marker + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gordon-probe-stallsh"), []byte(script), 0o755))
	h := newTestHost(t, HostConfig{PluginDirs: []string{dir}, StartTimeout: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := h.Probe(ctx, "stallsh")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting 10 s after the start was given up")
	}
	if !assert.Eventually(t, func() bool { return len(pidsWithArg(marker)) == 0 }, 3*time.Second, 50*time.Millisecond) {
		left := pidsWithArg(marker)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("processes of the stalled plugin left: %v", left)
	}
}

// pidsWithArg lists the processes one of whose arguments is arg.
func pidsWithArg(arg string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(b), "\x00"), arg) && !processGone(pid) {
			out = append(out, pid)
		}
	}
	return out
}
