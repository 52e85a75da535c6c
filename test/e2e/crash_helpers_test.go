package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
)

// Helpers for crash_test.go and fault_test.go (the plugin binary itself
// runs through fixture.RunCLI and fixture.Command): enumerate the
// journal-write boundaries of the gordonfault build, read status and ops
// as JSON, and check the post-recovery invariants (SPEC R45–R48).

// boundary is one successful mutating journal write of a deploy: Any is
// "any#N" (its position among all writes), Method "SaveOp#k".
type boundary struct{ Any, Method string }

func (b boundary) String() string { return b.Any + "_" + b.Method }

// enumerateVerb runs `docker gordon ARGS` with the fault build and
// GORDON_FAULT_LOG and returns every write boundary it passed, in order.
func enumerateVerb(t testing.TB, stateDir string, args ...string) ([]boundary, fixture.Result) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "boundaries.log")
	r := fixture.RunCLI(t, fixture.FaultBin(), stateDir, []string{"GORDON_FAULT_LOG=" + logPath}, args...)
	f, err := os.Open(logPath)
	require.NoError(t, err, "no boundary log: %s", r.String())
	defer f.Close()
	var out []boundary
	var method string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "any#") {
			out = append(out, boundary{Any: line, Method: method})
			continue
		}
		method = line
	}
	require.NoError(t, sc.Err())
	return out, r
}

// crashVerbAt runs `docker gordon ARGS` with the fault build and
// GORDON_FAULT=b.Any and checks that the CLI died of SIGKILL right after
// boundary b: the last boundary it logged is b (same position, same
// method), so a shifted count is reported instead of silently testing
// another boundary.
func crashVerbAt(t testing.TB, stateDir string, b boundary, args ...string) fixture.Result {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "crash.log")
	r := fixture.RunCLI(t, fixture.FaultBin(), stateDir, []string{"GORDON_FAULT=" + b.Any, "GORDON_FAULT_LOG=" + logPath}, args...)
	assert.True(t, r.Killed, "%s killed at %s: %s", args[0], b, r.String())
	raw, _ := os.ReadFile(logPath)
	lines := strings.Fields(string(raw))
	var last boundary
	if n := len(lines); n >= 2 {
		last = boundary{Any: lines[n-1], Method: lines[n-2]}
	}
	assert.Equal(t, b, last, "the crash happened right after the intended journal write")
	return r
}

// resetLatestOp deploys image unchanged (normal build), so the next crashed
// deploy starts from a terminal, successful latest op like the enumerating
// run did: an interrupted op finalized as failed keeps its failed steps
// eligible for retry (R46), and their retried cleanup at the next deploy's
// start adds journal writes that would shift every any#N.
func resetLatestOp(t testing.TB, stateDir, file string) {
	t.Helper()
	r := fixture.RunCLI(t, fixture.NormalBin(), stateDir, nil, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, "unchanged deploy after recovery: %s", r.String())
}

// statusJSON is the part of `status APP --format json` the crash tests read.
type statusJSON struct {
	App      string `json:"app"`
	Stopped  bool   `json:"stopped"`
	Services []struct {
		Service      string         `json:"service"`
		Container    string         `json:"container"`
		Image        string         `json:"image"`
		State        string         `json:"state"`
		BackendBinds map[string]int `json:"backend_binds"`
		IP           string         `json:"ip"`
		Markers      []string       `json:"markers"`
	} `json:"services"`
	Markers []json.RawMessage `json:"markers"`
	LastOp  *struct {
		ID, Kind, Outcome string
	} `json:"last_op"`
}

// appStatusJSON reads `status APP --format json` with the normal build.
func appStatusJSON(t testing.TB, stateDir, app string) statusJSON {
	t.Helper()
	r := fixture.RunCLI(t, fixture.NormalBin(), stateDir, nil, "status", app, "--format", "json")
	require.Equal(t, 0, r.Code, "status: %s", r.String())
	var sts []statusJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &sts), r.String())
	require.Len(t, sts, 1, r.String())
	return sts[0]
}

// opJSON is the part of one journaled op the crash tests read.
type opJSON struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Outcome string `json:"outcome"`
	Steps   []struct {
		ID, State, Before, After, Error, Detail string
	} `json:"steps"`
}

// latestOpJSON is the last op of `ops APP --format json` (oldest first).
func latestOpJSON(t testing.TB, stateDir, app string) opJSON {
	t.Helper()
	r := fixture.RunCLI(t, fixture.NormalBin(), stateDir, nil, "ops", app, "--format", "json")
	require.Equal(t, 0, r.Code, "ops: %s", r.String())
	var ops []opJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &ops), r.String())
	require.NotEmpty(t, ops, r.String())
	return ops[len(ops)-1]
}

// converged describes the app once recovery is done.
type converged struct {
	Container string // the one container ACTIVE names
	Image     string
	Served    string // what the container serves (identity from ident)
}

// checkConverged asserts the crash-recovery invariants for a one-service
// app (R45–R48, R43): exactly one container of the app exists, it is the
// running container ACTIVE names; no marker is left; the latest op is
// terminal; and the edge routes host to that container: GET path through
// the edge answers 200 with the same identity (ident) as a GET straight to
// the container at the address status reports for port 8080.
func checkConverged(t testing.TB, stateDir, app, service string, edge *fixture.Edge, host, path string, ident func(string) string) converged {
	t.Helper()
	st := appStatusJSON(t, stateDir, app)
	require.Len(t, st.Services, 1, "ACTIVE has one service: %+v", st)
	svc := st.Services[0]
	require.Equal(t, service, svc.Service)
	require.NotEmpty(t, svc.Container, "ACTIVE names a container")
	require.Equal(t, "running", svc.State, "ACTIVE's container %s runs", short(svc.Container))
	require.ElementsMatch(t, []string{svc.Container}, fixture.Managed(t, app, ""),
		"exactly one container with the app's labels, the one ACTIVE names (%s)", short(svc.Container))
	require.Empty(t, st.Markers, "no marker left: %s", st.Markers)
	op := latestOpJSON(t, stateDir, app)
	require.NotEmpty(t, op.Outcome, "latest op %s (%s) is terminal: %+v", op.ID, op.Kind, op.Steps)

	port := svc.BackendBinds["8080"]
	require.NotZero(t, port, "ACTIVE records the 8080 bind: %+v", svc)
	code, direct, err := httpGet(bindAddr(svc.IP, port), "", path)
	require.NoError(t, err, "GET the ACTIVE container at %s", bindAddr(svc.IP, port))
	require.Equal(t, 200, code, direct)
	want := ident(direct)
	// The traffic plugin returns only once the edge reports the generation
	// applied, so the route is in place when reconcile exits; a short poll
	// only absorbs the edge's keep-alive connections being re-dialled.
	var got, body string
	if !assert.Eventually(t, func() bool {
		c, b, err := edge.Get(host, path)
		body = fmt.Sprintf("%d %v %q", c, err, b)
		if err == nil && c == 200 {
			got = ident(b)
		}
		return got == want
	}, 2*time.Second, 100*time.Millisecond) {
		// The last answer, read here: the condition may still run.
		c, b, err := edge.Get(host, path)
		body = fmt.Sprintf("%d %v %q", c, err, b)
		if err == nil && c == 200 {
			got = ident(b)
		}
	}
	require.Equal(t, want, got, "the edge routes to ACTIVE's container %s (last edge answer %s)", short(svc.Container), body)
	return converged{Container: svc.Container, Image: svc.Image, Served: want}
}

// httpGet fetches http://addr/path with Host host (addr when empty).
func httpGet(addr, host, path string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if host != "" {
		req.Host = host
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// pluginProcs returns the pids of live processes running bin, or the
// gordon-backends binary beside it, in plugin mode (GORDON_PLUGIN set in
// their environment): the backend plugins a CLI of that binary launched.
func pluginProcs(bin string) []int {
	backends := filepath.Join(filepath.Dir(bin), fixture.BackendsName)
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if exe = strings.TrimSuffix(exe, " (deleted)"); err != nil || exe != bin && exe != backends {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte("\x00GORDON_PLUGIN=")) && !bytes.HasPrefix(env, []byte("GORDON_PLUGIN=")) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			// A zombie (state Z) has exited; its parent just has not reaped it.
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitNoPlugins waits up to d for every plugin process of bin to be gone
// and returns the survivors.
func waitNoPlugins(bin string, d time.Duration) []int {
	if assert.Eventually(quietT{}, func() bool { return len(pluginProcs(bin)) == 0 }, d, 50*time.Millisecond) {
		return nil
	}
	return pluginProcs(bin)
}

// quietT lets a helper await a condition with assert.Eventually and
// report the outcome itself rather than fail the test.
type quietT struct{}

func (quietT) Errorf(string, ...any) {}

// bindAddr is where the edge dials a status bind: ip:port, or
// 127.0.0.1:port for a loopback bind (SPEC R18).
func bindAddr(ip string, port int) string {
	if ip == "" {
		ip = "127.0.0.1"
	}
	return net.JoinHostPort(ip, strconv.Itoa(port))
}
