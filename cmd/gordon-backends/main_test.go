package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/plugins/runtime/docker"
)

// gordon-backends is also the internal readiness helper (R30) of the
// probe-helper image runtime/docker builds from it: with the helper's
// environment it answers as the helper (a result line, exit 2 for a bad
// request) instead of refusing to run outside plugin mode.
func TestR30_BackendsBinaryIsTheProbeHelperOfTheImageItBuilds(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gordon-backends")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), docker.EnvProbeHelper+"=not json")
	stdout, err := cmd.Output()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "want an exit status, got %v", err)
	assert.Equal(t, 2, exit.ExitCode())
	var res docker.HelperResult
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(string(stdout))), &res), "stdout %q", stdout)
	assert.False(t, res.Ready)
	assert.Contains(t, res.Detail, "bad helper request")

	// Neither helper nor plugin mode: it says what it is and exits 2.
	cmd = exec.Command(bin)
	msg, err := cmd.CombinedOutput()
	require.True(t, errors.As(err, &exit), "want an exit status, got %v", err)
	assert.Equal(t, 2, exit.ExitCode())
	assert.Contains(t, string(msg), "docker gordon starts it")
}
