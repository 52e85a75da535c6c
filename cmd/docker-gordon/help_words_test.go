package main

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
