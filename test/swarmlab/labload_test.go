package swarmlab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/loadgen"
)

// envLabLoad carries a labLoadConfig (JSON) into this test binary re-run
// inside the lab's network namespace: it runs an HTTP load there (the
// nodes' addresses are reachable only from inside the lab) until its stdin
// closes, printing its counts every 100 ms and its stats at the end.
const envLabLoad = "GORDON_SWARMLAB_LOAD"

type labLoadConfig struct {
	URL     string        `json:"url"`
	Host    string        `json:"host"`
	Clients int           `json:"clients"`
	Max     time.Duration `json:"max"`
	NetNS   string        `json:"netns"`
}

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envLabLoad); cfg != "" {
		os.Exit(runLabLoad(cfg))
	}
	os.Exit(m.Run())
}

// runLabLoad is the helper process: "progress OK FAILED" lines, then
// "stats {json}".
func runLabLoad(raw string) int {
	var c labLoadConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Println("error", err)
		return 2
	}
	run, err := loadgen.StartHTTP(loadgen.HTTPConfig{URL: c.URL, Host: c.Host, Clients: c.Clients, FailurePause: 10 * time.Millisecond, NetNS: c.NetNS,
		Bounds: loadgen.Bounds{MaxDuration: c.Max}, DistinctErrors: true})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			st := run.Stop()
			data, _ := json.Marshal(st)
			fmt.Printf("stats %s\n", data)
			return 0
		case <-tick.C:
			ok, failed := run.Snapshot()
			fmt.Printf("progress %d %d\n", ok, failed)
		}
	}
}

// labLoad is a running load inside the lab.
type labLoad struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	ok    int64
	fail  int64
	stats *loadgen.HTTPStats
	done  chan struct{}
	once  sync.Once
	res   loadgen.HTTPStats
	// firstFail and lastFail are when a progress line first and last
	// showed more failures than the one before (zero: none failed).
	firstFail, lastFail time.Time
}

// startLabLoad runs clients keep-alive HTTP/1.1 clients against url (Host
// host) from inside the lab's namespace, bounded by max.
func startLabLoad(t *testing.T, lab *Lab, url, host string, clients int, max time.Duration) *labLoad {
	t.Helper()
	cfg, _ := json.Marshal(labLoadConfig{URL: url, Host: host, Clients: clients, Max: max, NetNS: lab.LabNS})
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command("nsenter", "--net=/var/run/netns/"+lab.LabNS, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), envLabLoad+"="+string(cfg))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	l := &labLoad{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go l.read(stdout)
	t.Cleanup(func() { l.Stop() })
	return l
}

func (l *labLoad) read(r io.Reader) {
	defer close(l.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "progress "):
			var ok, fail int64
			if _, err := fmt.Sscanf(line, "progress %d %d", &ok, &fail); err == nil {
				l.mu.Lock()
				if fail > l.fail {
					now := time.Now()
					if l.firstFail.IsZero() {
						l.firstFail = now
					}
					l.lastFail = now
				}
				l.ok, l.fail = ok, fail
				l.mu.Unlock()
			}
		case strings.HasPrefix(line, "error "):
			fmt.Fprintln(os.Stderr, "lab load:", line)
		case strings.HasPrefix(line, "stats "):
			var st loadgen.HTTPStats
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "stats ")), &st) == nil {
				l.mu.Lock()
				l.stats = &st
				l.mu.Unlock()
			}
		}
	}
}

// counts are the answered (2xx) and failed requests so far.
func (l *labLoad) counts() (ok, failed int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok, l.fail
}

// failWindow is when requests failed, to the 100 ms of the progress
// lines: from the first to the last line that counted a new failure
// (zero times: none failed).
func (l *labLoad) failWindow() (first, last time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.firstFail, l.lastFail
}

// awaitOK waits until at least n more requests than now have been
// answered 2xx (at most within).
func (l *labLoad) awaitOK(t *testing.T, n int64, within time.Duration) {
	t.Helper()
	base, _ := l.counts()
	require.Eventually(t, func() bool { ok, _ := l.counts(); return ok >= base+n }, within, 20*time.Millisecond,
		"the load got fewer than %d answers within %s", n, within)
}

// Stop ends the load and returns its stats (idempotent).
func (l *labLoad) Stop() loadgen.HTTPStats {
	l.once.Do(func() {
		_ = l.stdin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		select {
		case <-l.done:
		case <-ctx.Done():
			_ = l.cmd.Process.Kill()
			<-l.done
		}
		_ = l.cmd.Wait()
		l.mu.Lock()
		if l.stats != nil {
			l.res = *l.stats
		} else {
			l.res = loadgen.HTTPStats{OK: l.ok, Transport: l.fail, Errors: []string{"the load helper printed no stats"}}
		}
		l.mu.Unlock()
	})
	return l.res
}
