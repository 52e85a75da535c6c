package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var logTimeRE = regexp.MustCompile(`time="[^"]*"`)

// The installed build, which runs the compose loader in the gordon-compose
// helper (-tags gordoncomposehelper), converts and refuses every bundled
// compose project exactly as a plain build does in process: the same
// manifest on stdout, the same problems and status on stderr, the same exit
// code. Without the helper beside it, it refuses compose files and says
// why, and still reads TOML manifests.
func TestComposeHelper_InstalledBuildConvertsAsPlainBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds docker-gordon twice and gordon-compose")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	plain, tagged := filepath.Join(t.TempDir(), "docker-gordon"), filepath.Join(t.TempDir(), "docker-gordon")
	helper := filepath.Join(filepath.Dir(tagged), "gordon-compose-t1")
	for _, b := range [][]string{
		{"-o", plain, "./cmd/docker-gordon"},
		{"-tags", "gordoncomposehelper", "-ldflags", "-X main.composeName=gordon-compose-t1", "-o", tagged, "./cmd/docker-gordon"},
		{"-o", helper, "./cmd/gordon-compose"},
	} {
		cmd := exec.Command("go", append([]string{"build"}, b...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go build %v:\n%s", b, out)
	}
	state := t.TempDir()
	run := func(bin string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, append([]string{"gordon"}, args...)...)
		cmd.Env = append(os.Environ(), "GORDON_STATE_DIR="+state, "DOCKER_CONFIG="+t.TempDir())
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		// compose-go's warnings (logrus) carry the time of day.
		return so.String(), logTimeRE.ReplaceAllString(se.String(), `time="T"`), code
	}
	dirs, err := filepath.Glob(filepath.Join(root, "core/compose/testdata/corpus/*"))
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	dirs = append(dirs, filepath.Join(root, "core/compose/testdata/shop"))
	refused := 0
	for _, dir := range dirs {
		for _, args := range [][]string{
			{"convert", "-f", filepath.Join(dir, "compose.yaml")},
			{"convert", "-f", filepath.Join(dir, "compose.yaml"), "-p", "renamed", "--project-directory", dir},
		} {
			wo, we, wc := run(plain, args...)
			go_, ge, gc := run(tagged, args...)
			assert.Equal(t, wo, go_, "stdout of %v", args)
			assert.Equal(t, we, ge, "stderr of %v", args)
			assert.Equal(t, wc, gc, "exit code of %v", args)
			if wc != 0 {
				refused++
			}
		}
	}
	assert.NotZero(t, refused, "refused projects are compared too")

	require.NoError(t, os.Remove(helper))
	_, se, code := run(tagged, "convert", "-f", filepath.Join(dirs[0], "compose.yaml"))
	assert.Equal(t, 1, code)
	assert.Contains(t, se, "loads compose files with gordon-compose-t1, which is not beside it")
	manifest := filepath.Join(t.TempDir(), "app.toml")
	require.NoError(t, os.WriteFile(manifest, []byte("name = \"app\"\n[services.web]\nimage = \"web:1\"\n"), 0o600))
	_, se, code = run(tagged, "convert", "-f", manifest)
	assert.Contains(t, se, "already an app manifest (TOML)", "a TOML manifest needs no helper")
	assert.Equal(t, 1, code)
}
