package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/cli/cli/command"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/cmd/internal/helptext"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/cli.md from the command tree")

// cliReference is docs/cli.md as the command tree generates it.
func cliReference(t *testing.T) string {
	t.Helper()
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))),
		command.WithOutputStream(io.Discard), command.WithErrorStream(io.Discard))
	require.NoError(t, err)
	return helptext.Markdown(newRootCommand(dcli))
}

// docs/cli.md is generated from the cobra command tree: it fails when a
// command, flag or help text changed and the file was not regenerated.
func TestCLIReferenceIsCurrent(t *testing.T) {
	want := cliReference(t)
	file := filepath.Join("..", "..", "docs", "cli.md")
	if *updateDocs {
		require.NoError(t, os.WriteFile(file, []byte(want), 0o644))
		return
	}
	got, err := os.ReadFile(file)
	require.NoError(t, err, "docs/cli.md is missing: generate it with make docs")
	if string(got) != want {
		t.Fatalf("docs/cli.md differs from what the command tree generates: regenerate it with make docs (go test ./cmd/docker-gordon -run TestCLIReferenceIsCurrent -count=1 -args -update-docs) and commit it")
	}
}

// --help lists the global flags once: under docker gordon --help, not in
// a verb's Options, which name them in one line instead.
func TestHelpListsGlobalFlagsOnce(t *testing.T) {
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))),
		command.WithOutputStream(io.Discard), command.WithErrorStream(io.Discard))
	require.NoError(t, err)
	root := newRootCommand(dcli)
	var deploy, edgeStart string
	for _, c := range root.Commands() {
		switch c.Name() {
		case "deploy":
			deploy = c.UsageString()
		case "edge":
			for _, s := range c.Commands() {
				if s.Name() == "start" {
					edgeStart = s.UsageString()
				}
			}
		}
	}
	for _, h := range []string{deploy, edgeStart} {
		require.NotEmpty(t, h)
		require.NotContains(t, h, "--state-dir string", h)
		require.Contains(t, h, "Global options: --debug, --lock-timeout, --plugin-dir, --state-dir (see gordon --help)")
		require.Contains(t, h, "Options:")
	}
	require.Contains(t, deploy, "--dry-run")
	top := root.UsageString()
	require.Equal(t, 1, strings.Count(top, "--state-dir string"), top)
	require.Contains(t, top, "Global Options:")
}
