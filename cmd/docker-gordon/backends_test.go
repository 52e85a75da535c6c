package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Built-in backends run the gordon-backends binary of the same build when
// it sits beside docker-gordon, and docker-gordon itself otherwise (issue
// 24 item 6).
func TestBuiltinBackends_RunTheSameBuildsBinaryBesideTheCLI(t *testing.T) {
	old := backendsName
	t.Cleanup(func() { backendsName = old })
	dir := t.TempDir()
	self := filepath.Join(dir, "docker-gordon")
	require.NoError(t, os.WriteFile(self, []byte("#!/bin/sh\n"), 0o755))
	backendsName = "gordon-backends-b1"
	sib := filepath.Join(dir, backendsName)

	exe, why := builtinExe(self)
	assert.Equal(t, self, exe, "no backends binary beside: the CLI serves its built-ins")
	assert.Empty(t, why)

	// Another build's backends binary is never used: its name differs.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gordon-backends-b0"), []byte("#!/bin/sh\n"), 0o755))
	exe, _ = builtinExe(self)
	assert.Equal(t, self, exe)

	require.NoError(t, os.WriteFile(sib, []byte("#!/bin/sh\n"), 0o644))
	exe, why = builtinExe(self)
	assert.Equal(t, self, exe, "a backends file that is not executable is not run")
	assert.Contains(t, why, "not an executable file")

	require.NoError(t, os.Chmod(sib, 0o755))
	exe, why = builtinExe(self)
	assert.Equal(t, sib, exe)
	assert.Empty(t, why)

	// Reached through a symlink (a cli-plugins entry pointing at bin/),
	// the binary beside the target is found.
	links := t.TempDir()
	link := filepath.Join(links, "docker-gordon")
	require.NoError(t, os.Symlink(self, link))
	exe, _ = builtinExe(link)
	assert.Equal(t, sib, exe)

	// A plain `go build` carries no name: the CLI serves its built-ins.
	backendsName = ""
	exe, _ = builtinExe(self)
	assert.Equal(t, self, exe)
}

// The installed build (-tags gordoncomposehelper) loads compose files with
// the gordon-compose helper of the same build beside it; without one it
// says what is missing instead of loading anything else.
func TestComposeHelper_TheSameBuildsBinaryBesideTheCLI(t *testing.T) {
	old := composeName
	t.Cleanup(func() { composeName = old })
	dir := t.TempDir()
	self := filepath.Join(dir, "docker-gordon")
	require.NoError(t, os.WriteFile(self, []byte("#!/bin/sh\n"), 0o755))

	composeName = ""
	_, err := composeHelperExe(self)
	assert.ErrorContains(t, err, "-X main.composeName", "a tagged build without the name says how it was built wrong")

	composeName = "gordon-compose-b1"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gordon-compose-b0"), []byte("#!/bin/sh\n"), 0o755))
	_, err = composeHelperExe(self)
	assert.ErrorContains(t, err, "loads compose files with gordon-compose-b1, which is not beside it", "another build's helper is never run")

	sib := filepath.Join(dir, composeName)
	require.NoError(t, os.WriteFile(sib, []byte("#!/bin/sh\n"), 0o644))
	_, err = composeHelperExe(self)
	assert.ErrorContains(t, err, "not an executable file")

	require.NoError(t, os.Chmod(sib, 0o755))
	exe, err := composeHelperExe(self)
	require.NoError(t, err)
	assert.Equal(t, sib, exe)

	link := filepath.Join(t.TempDir(), "docker-gordon")
	require.NoError(t, os.Symlink(self, link))
	exe, err = composeHelperExe(link)
	require.NoError(t, err)
	assert.Equal(t, sib, exe, "reached through a cli-plugins symlink, the helper beside the target")
}
