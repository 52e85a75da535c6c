// Package e2e drives the real binaries (docker gordon through the docker
// CLI, gordon-edge) against a real Docker engine, with images built locally
// FROM scratch (ARCHITECTURE §9). TestMain starts an engine when none
// answers (.ci/ensure-docker) and builds the binaries once.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

var (
	repoRoot     string
	binDir       string // gordon-edge, docker-gordon
	dockerConfig string // DOCKER_CONFIG with cli-plugins/docker-gordon
	// dockerConfigFault holds a docker-gordon built with -tags gordonfault
	// (GORDON_FAULT crash injection, crash_test.go).
	dockerConfigFault string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	if err := exec.Command("docker", "info").Run(); err != nil {
		cmd := exec.Command(filepath.Join(repoRoot, ".ci", "ensure-docker"))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: no Docker engine and .ci/ensure-docker failed:", err)
			return 1
		}
	}
	tmp, err := os.MkdirTemp("", "gordon-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	binDir = filepath.Join(tmp, "bin")
	dockerConfig = filepath.Join(tmp, "docker-config")
	dockerConfigFault = filepath.Join(tmp, "docker-config-fault")
	for _, d := range []string{dockerConfig, dockerConfigFault} {
		if err := os.MkdirAll(filepath.Join(d, "cli-plugins"), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	for _, b := range []struct{ pkg, out, tags string }{
		{"./cmd/docker-gordon", filepath.Join(dockerConfig, "cli-plugins", "docker-gordon"), ""},
		{"./cmd/gordon-edge", filepath.Join(binDir, "gordon-edge"), ""},
		{"./cmd/docker-gordon", filepath.Join(dockerConfigFault, "cli-plugins", "docker-gordon"), "gordonfault"},
	} {
		cmd := exec.Command("go", "build", "-trimpath", "-tags", b.tags, "-ldflags", "-X main.version=e2e", "-o", b.out, b.pkg)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// result is one CLI run.
type result struct {
	Stdout, Stderr string
	Code           int
	Elapsed        time.Duration
}

// gordon runs `docker gordon ARGS` with the test's state directory and the
// test build of the plugin. It never fails the test itself.
func gordon(t testing.TB, stateDir string, args ...string) result {
	t.Helper()
	return gordonIn(t, stateDir, "", args...)
}

// gordonIn is gordon with stdin.
func gordonIn(t testing.TB, stateDir, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", append([]string{"gordon"}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+dockerConfig, "GORDON_STATE_DIR="+stateDir)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	t0 := time.Now()
	err := cmd.Run()
	r := result{Stdout: so.String(), Stderr: se.String(), Elapsed: time.Since(t0)}
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

func (r result) String() string {
	return fmt.Sprintf("exit %d after %s\nstdout:\n%s\nstderr:\n%s", r.Code, r.Elapsed.Round(time.Millisecond), r.Stdout, r.Stderr)
}
