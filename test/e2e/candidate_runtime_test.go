package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// A candidate that exits at once (status 3) while it is probed fails its
// step at once, naming exit code 3, and is never restarted by the engine:
// it gets no restart policy before it serves (R59). The old generation
// keeps serving.
func TestR59_CandidateThatExitsAtOnceFailsWithItsExitCodeAndIsNotRestarted(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2eexit3")
	host := "exit3.test"
	a.MustDeploy(webManifest(a.Name, v1, host, ""))
	before := fixture.Managed(t, a.Name, "web")
	require.Len(t, before, 1)

	ev := fixture.WatchEvents(t, a.Name)
	_, r := a.Deploy(webManifest(a.Name, v1, host, "[services.web.env]\nEXIT_AT_ONCE = \"true\"\n"))
	events := ev.Stop()
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, "exited with code 3", "the error names the exit code")
	require.NotContains(t, r.Stderr, "readiness timeout", "the exit ended the wait, not the readiness budget")
	// The readiness timeout (20 s) is the bound R59 cuts short.
	require.Less(t, r.Elapsed, 20*time.Second, "failed before the readiness timeout")
	starts := map[string]int{}
	for _, e := range events {
		if e.Status == "start" && e.ID != before[0] {
			starts[e.ID]++
		}
	}
	require.Len(t, starts, 1, "one candidate: %v", starts)
	for id, n := range starts {
		require.Equal(t, 1, n, "candidate %s started once, never restarted by the engine", short(id))
	}
	require.Equal(t, before, fixture.Managed(t, a.Name, "web"), "candidate removed, old generation kept")
	code, body, err := a.Edge.Get(host, "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.Equal(t, "v1", versionOf(body))
}

// A serving generation has the engine's restart policy: once the switch is
// done the container a deploy published comes back by itself after a crash.
func TestR59_ServingGenerationGetsItsRestartPolicy(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2epolicy")
	a.MustDeploy(webManifest(a.Name, v1, "policy.test", ""))
	ids := fixture.Managed(t, a.Name, "web")
	require.Len(t, ids, 1)
	out, err := exec.Command("docker", "inspect", "--format", "{{.HostConfig.RestartPolicy.Name}}", ids[0]).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "unless-stopped", strings.TrimSpace(string(out)))
}

// A readiness plugin that never completes its go-plugin handshake (a
// script whose child keeps its stdout open) is bounded by the readiness
// timeout plus 10 s: the deploy fails naming the plugin, the old generation
// serves throughout, and neither the plugin nor its child is left.
func TestR32_PluginThatNeverHandshakesIsBoundedAndLeavesNoProcess(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	dir := t.TempDir()
	const marker = "61.7"
	script := "#!/bin/sh\n# never writes the go-plugin handshake; its child holds stdout open\nsleep " + marker + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gordon-probe-stallsh"), []byte(script), 0o755))
	a := fixture.NewApp(t, "e2estallsh")
	host := "stallsh.test"
	a.MustDeploy(webManifest(a.Name, v1, host, ""))
	before := fixture.Managed(t, a.Name, "web")

	const timeout = 5 * time.Second
	l := fixture.StartLoad(t, "http://"+a.Edge.HTTPAddr+"/", host, 4, instanceOf)
	a.Write(pluginManifest(a.Name, v1, host, "stallsh", "", timeout.String()))
	r := a.Gordon("deploy", "--plugin-dir", dir, "-f", a.File)
	st := l.Stop()
	t.Logf("deploy took %s; load %s", r.Elapsed.Round(time.Millisecond), st)
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, "stallsh")
	require.Contains(t, r.Stderr, "handshake")
	require.Less(t, r.Elapsed, timeout+10*time.Second, "bounded by the readiness timeout + 10 s")
	require.Equal(t, before, fixture.Managed(t, a.Name, "web"), "old generation kept")
	require.Zero(t, st.Transport+st.Non2xx, "old generation served throughout: %s %v", st, st.Errors)
	if !assert.Eventually(t, func() bool { return len(procsWithArg(dir, marker)) == 0 }, 3*time.Second, 100*time.Millisecond) {
		left := procsWithArg(dir, marker)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("plugin processes left after the deploy ended: %v", left)
	}
}

// procsWithArg lists the PIDs with an argument equal to arg or under dir.
func procsWithArg(dir, arg string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(b, []byte{0}) {
			if string(a) == arg || strings.HasPrefix(string(a), dir+string(filepath.Separator)) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// Ctrl-C while a candidate is probed removes the candidate before the CLI
// exits (the clean-up does not use the interrupted connection), leaves the
// old generation serving, and the interrupted verb exits 130.
func TestInterrupt_CtrlCDuringReadinessRemovesCandidateAndExits130(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2ectrlc")
	host := "ctrlc.test"
	a.MustDeploy(webManifest(a.Name, v1, host, ""))
	before := fixture.Managed(t, a.Name, "web")
	require.Len(t, before, 1)
	a.Write(webManifest(a.Name, v1, host, "[services.web.env]\nNEVER_READY = \"true\"\n"))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, so, se := fixture.Command(ctx, fixture.NormalBin(), a.State, nil, "deploy", "-f", a.File)
	t0 := time.Now()
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var ended error
	exited := false
	probed := assert.Eventually(t, func() bool {
		select {
		case ended = <-done:
			exited = true
			return true
		default:
		}
		return candidateRunning(t, a.Name, before[0])
	}, 30*time.Second, 100*time.Millisecond)
	if exited {
		t.Fatalf("deploy ended before Ctrl-C: %s", fixture.Finish(ended, so, se, t0).String())
	}
	require.True(t, probed, "no candidate being probed within 30 s: %s", se.String())
	require.NoError(t, syscall.Kill(cmd.Process.Pid, syscall.SIGINT))
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		err = <-done
		t.Errorf("CLI still running a minute after Ctrl-C")
	}
	r := fixture.Finish(err, so, se, t0)
	t.Log(r.String())
	assert.Equal(t, 130, r.Code, "an interrupted verb exits 130")
	assert.NotContains(t, r.Stderr, "client connection is closing", "the clean-up did not use the closed connection")
	assert.NotContains(t, r.Stderr, "leftover", "nothing left over")
	require.Equal(t, before, fixture.Managed(t, a.Name, "web"), "the candidate is gone when the CLI exits; the old generation kept")
	code, body, gerr := a.Edge.Get(host, "/")
	require.NoError(t, gerr)
	require.Equal(t, 200, code)
	require.Equal(t, "v1", versionOf(body))
	require.Empty(t, waitNoPlugins(fixture.NormalBin(), 3*time.Second), "no plugin outlives the CLI")
}

// A ulimit the engine cannot grant (a hard nofile above the kernel's
// fs.nr_open, which bounds every engine, rootful or not) is refused by
// preflight, before anything is stored or changed, by `validate` and by
// `deploy`, naming the limit; the old generation keeps serving.
func TestR12_UlimitTheEngineCannotGrantRefusedBeforeAnythingChanges(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	require.NoError(t, err)
	nrOpen, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	require.NoError(t, err)
	a := fixture.NewApp(t, "e2eulimit")
	host := "ulimit.test"
	a.MustDeploy(webManifest(a.Name, v1, host, ""))
	before := fixture.Managed(t, a.Name, "web")
	statusBefore := a.Gordon("status", a.Name, "--format", "json")
	require.Equal(t, 0, statusBefore.Code, statusBefore.String())

	a.Write(webManifest(a.Name, v1, host, fmt.Sprintf("ulimits = { nofile = { soft = 1024, hard = %d } }\n", nrOpen+1)))
	v := a.Gordon("validate", "-f", a.File)
	require.Equal(t, 1, v.Code, v.String())
	require.Contains(t, v.Stderr, "nofile")

	r := a.Gordon("deploy", "-f", a.File)
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, "ulimit nofile")
	require.Contains(t, r.Stderr, "nothing was changed")
	require.NotContains(t, r.Stderr, "stored revision")
	require.Equal(t, before, fixture.Managed(t, a.Name, "web"), "nothing created, old generation kept")
	after := a.Gordon("status", a.Name, "--format", "json")
	require.Equal(t, statusBefore.Stdout, after.Stdout, "status unchanged: no revision stored, no op claimed")
	code, body, gerr := a.Edge.Get(host, "/")
	require.NoError(t, gerr)
	require.Equal(t, 200, code)
	require.Equal(t, "v1", versionOf(body))
}

// candidateRunning reports whether app's web service has a running
// container other than old (a candidate past its start, being probed).
func candidateRunning(t *testing.T, app, old string) bool {
	t.Helper()
	for _, id := range fixture.Managed(t, app, "web") {
		if id == old {
			continue
		}
		out, err := exec.Command("docker", "inspect", "--format", "{{.State.Running}}", id).Output()
		if err == nil && strings.TrimSpace(string(out)) == "true" {
			return true
		}
	}
	return false
}

// R13 in validate: a manifest whose public host another app of the state
// directory routes is refused by `validate`, naming the owner, as deploy
// would refuse it; with a free host it passes. Nothing is stored.
func TestR13_ValidateRefusesAHostAnotherAppRoutes(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2evalhost")
	host := "valhost.test"
	a.MustDeploy(webManifest(a.Name, v1, host, ""))

	a.Write(webManifest("e2evalother", v1, host, ""))
	v := a.Gordon("validate", "-f", a.File)
	require.Equal(t, 1, v.Code, v.String())
	assert.Contains(t, v.Stderr, "host valhost.test is already routed to e2evalhost/web", v.String())
	assert.Contains(t, v.Stderr, "nothing was changed")

	a.Write(webManifest("e2evalother", v1, "valfree.test", ""))
	v = a.Gordon("validate", "-f", a.File)
	require.Equal(t, 0, v.Code, v.String())
	st := a.Gordon("status", "e2evalother")
	assert.NotEqual(t, 0, st.Code, "validate stored nothing: %s", st.String())
}
