package main

import (
	"github.com/docker/cli/cli"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helpLeaks matches what must never reach a user in --help: spec ids
// (R75, S3, "SPEC") and the journal's internal record names.
var helpLeaks = regexp.MustCompile(`\b(SPEC|R[0-9]+|S[0-9]+|ACTIVE|DESIRED|[Ii]ncarnations?)\b`)

// Every command's --help (use line, short and long text, examples, every
// flag's usage) speaks the user's words: no spec ids and no internal
// record names.
func TestHelpTextHasNoSpecIDsOrRecordNames(t *testing.T) {
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))),
		command.WithOutputStream(io.Discard), command.WithErrorStream(io.Discard))
	require.NoError(t, err)
	root := newRootCommand(dcli)
	var leaks []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(where, text string) {
			for _, m := range helpLeaks.FindAllString(text, -1) {
				leaks = append(leaks, c.CommandPath()+" "+where+": "+m)
			}
		}
		check("use", c.Use)
		check("short", c.Short)
		check("long", c.Long)
		check("example", c.Example)
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if !f.Hidden {
					check("--"+f.Name, f.Usage)
				}
			})
		}
		for _, sub := range c.Commands() {
			if !sub.Hidden {
				walk(sub)
			}
		}
	}
	walk(root)
	require.Empty(t, leaks, "help texts with spec ids or internal record names")
}

// One convention for the verbs that show progress: each takes -q/--quiet
// (no progress lines), and a wrong argument count exits 125, as docker's
// own usage errors do.
func TestVerbsWithProgressTakeQuietAndUsageErrorsExit125(t *testing.T) {
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))),
		command.WithOutputStream(io.Discard), command.WithErrorStream(io.Discard))
	require.NoError(t, err)
	root := newRootCommand(dcli)
	for _, verb := range []string{"deploy", "scale", "rollback", "start", "stop", "restart", "remove"} {
		c, _, err := root.Find([]string{verb})
		require.NoError(t, err, verb)
		f := c.Flags().Lookup("quiet")
		if assert.NotNil(t, f, "%s has no --quiet", verb) {
			assert.Equal(t, "q", f.Shorthand, verb)
		}
	}
	scale, _, err := root.Find([]string{"scale"})
	require.NoError(t, err)
	err = scale.Args(scale, []string{"shop", "web"})
	var se cli.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 125, se.StatusCode)
	assert.Contains(t, se.Error(), "usage: gordon scale APP SERVICE=N")
}

// logs --tail takes all|N, as edge logs --tail and docker compose logs do.
func TestLogsTailTakesAllOrACount(t *testing.T) {
	for in, want := range map[string]int{"all": 0, "0": 0, "25": 25} {
		n, err := parseTail(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, n, in)
	}
	for _, in := range []string{"-1", "ten", "1.5"} {
		_, err := parseTail(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), "want all or a number", in)
	}
}
