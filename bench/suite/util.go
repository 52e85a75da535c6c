package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// logf prints one progress line to stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// runResult is one finished command.
type runResult struct {
	Stdout, Stderr string
	Code           int
	Start, End     time.Time
}

// Elapsed is the command's wall time.
func (r runResult) Elapsed() time.Duration { return r.End.Sub(r.Start) }

func (r runResult) err(what string) error {
	if r.Code == 0 {
		return nil
	}
	return fmt.Errorf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.Code, tail(r.Stdout, 1500), tail(r.Stderr, 1500))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// run executes argv with extra environment and returns its output and wall
// time (fork to exit). The process gets its own process group so a
// cancelled context ends it and its children (the docker CLI runs
// docker-gordon, which runs backend plugins).
func run(ctx context.Context, env []string, argv ...string) runResult {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	r := runResult{Start: time.Now()}
	err := cmd.Run()
	r.End = time.Now()
	r.Stdout, r.Stderr = so.String(), se.String()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		r.Code = -1
		r.Stderr += "\n" + err.Error()
	}
	return r
}

// proc is a long-running child started by the suite (edge, backends,
// reconcile --watch), in its own process group; Stop ends the group.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

var (
	procsMu sync.Mutex
	procs   []*proc
)

// startProc starts argv; stdout is returned as a reader when wantStdout.
func startProc(name string, env []string, logPath string, wantStdout bool, argv ...string) (*proc, io.Reader, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out io.Reader
	var logf *os.File
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, nil, err
		}
		logf = f
		cmd.Stderr = f
		if !wantStdout {
			cmd.Stdout = f
		}
	}
	if wantStdout {
		r, err := cmd.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		out = r
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		if logf != nil {
			logf.Close()
		}
		close(p.done)
	}()
	procsMu.Lock()
	procs = append(procs, p)
	procsMu.Unlock()
	return p, out, nil
}

// PID is the child's process id.
func (p *proc) PID() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM to the process group, then SIGKILL after 5 s.
func (p *proc) Stop() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// stopAllProcs stops every child the suite started (cleanup, Ctrl-C).
func stopAllProcs() {
	procsMu.Lock()
	ps := slices.Clone(procs)
	procsMu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop() }()
	}
	wg.Wait()
}

// freeAddr returns a free 127.0.0.1:port.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitListen waits until addr accepts TCP connections.
func waitListen(ctx context.Context, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s not listening after %s", addr, limit)
}

// httpGet fetches url with Host host and returns the status code.
func httpGet(ctx context.Context, c *http.Client, url, host string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// descendants lists pid's descendants (not pid itself), depth first.
func descendants(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
				out = append(out, descendants(n)...)
			}
		}
	}
	return out
}

// comm is the process name of pid.
func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// environOf returns the value of key in pid's environment.
func environOf(pid int, key string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	for kv := range strings.SplitSeq(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// median of ds (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// percentile p (0..100) of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func medianInt(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(kib int64) float64 { return float64(kib) / 1024 }
