package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// A FROM-scratch image has no dynamic loader: a dynamically linked binary
// is refused before anything is built, a static one and a non-ELF file
// pass.
func TestCheckStatic_RefusesDynamicallyLinkedBinaries(t *testing.T) {
	dynamic, err := exec.LookPath("ls")
	require.NoError(t, err)
	err = checkStatic(dynamic)
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "dynamically linked")
	assert.Contains(t, err.Error(), "CGO_ENABLED=0")

	dir := t.TempDir()
	script := filepath.Join(dir, "run.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755))
	assert.NoError(t, checkStatic(script), "not ELF: left to the engine")

	src := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644))
	static := filepath.Join(dir, "static")
	build := exec.Command("go", "build", "-o", static, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.NoError(t, checkStatic(static))
}

// Only a static Linux executable for the engine's architecture runs in a
// FROM-scratch image or is sent to a remote engine as a custom plugin.
func TestStaticLinuxExecutable_OnlyStaticForTheEnginesArchitecture(t *testing.T) {
	assert.Equal(t, "not an ELF executable", StaticLinuxExecutable([]byte("#!/bin/sh\necho hi\n"), "x86_64"))
	if data, err := os.ReadFile("/bin/ls"); err == nil {
		assert.Contains(t, StaticLinuxExecutable(data, "x86_64"), "dynamically linked")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	if StaticLinuxExecutable(data, "x86_64") != "" {
		t.Skip("this test binary is not static (CGO_ENABLED=0 go test checks the architecture case)")
	}
	assert.Contains(t, StaticLinuxExecutable(data, "aarch64"), "built for EM_X86_64")
}
