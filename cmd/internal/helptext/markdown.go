package helptext

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Markdown is the CLI reference (docs/cli.md) of root's command tree: the
// global flags once, a table of the commands, then one section per
// command (depth first, in the order root lists them) with its usage,
// aliases, long text and own flags. The output depends on the tree only
// (no dates, no terminal width), so a test can compare it with the file.
func Markdown(root *cobra.Command) string {
	var b strings.Builder
	name := "docker " + root.Name()
	fmt.Fprintf(&b, "# %s: command reference\n\n", name)
	b.WriteString("<!-- Generated from the command tree by `make docs`; do not edit. -->\n\n")
	fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(root.Short))
	b.WriteString("## Global options\n\nEvery command takes these:\n\n```text\n")
	b.WriteString(strings.TrimRight(root.PersistentFlags().FlagUsagesWrapped(flagWidth), " \n"))
	b.WriteString("\n```\n\n## Commands\n\n| command | what it does |\n|---|---|\n")
	var all []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() || sub.Name() == "help" {
				continue
			}
			all = append(all, sub)
			walk(sub)
		}
	}
	walk(root)
	for _, c := range all {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", path(c), anchor(c), strings.ReplaceAll(c.Short, "|", "\\|"))
	}
	for _, c := range all {
		section(&b, root, c)
	}
	return b.String()
}

func section(b *strings.Builder, root, c *cobra.Command) {
	fmt.Fprintf(b, "\n## %s\n\n%s\n\n```text\n", path(c), strings.TrimSpace(c.Short))
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(b, "%s COMMAND\n", path(c))
	} else {
		fmt.Fprintf(b, "%s\n", strings.TrimPrefix("docker "+strings.TrimSpace(c.UseLine()), "docker docker "))
	}
	b.WriteString("```\n")
	if len(c.Aliases) > 0 {
		fmt.Fprintf(b, "\nAliases: `%s`\n", strings.Join(c.Aliases, "`, `"))
	}
	if long := strings.TrimSpace(c.Long); long != "" {
		fmt.Fprintf(b, "\n```text\n%s\n```\n", long)
	}
	if c.HasExample() {
		fmt.Fprintf(b, "\nExamples:\n\n```sh\n%s\n```\n", strings.TrimRight(c.Example, "\n"))
	}
	if own := strings.TrimRight(OwnFlags(root, c).FlagUsagesWrapped(flagWidth), " \n"); own != "" {
		fmt.Fprintf(b, "\nOptions:\n\n```text\n%s\n```\n", own)
	}
}

// path is c's command line: "docker gordon …" whether or not the tree
// hangs under docker's root command.
func path(c *cobra.Command) string {
	if p := c.CommandPath(); strings.HasPrefix(p, "docker ") {
		return p
	}
	return "docker " + c.CommandPath()
}

// anchor is GitHub's heading anchor of path(c): lower case, spaces to
// dashes, other punctuation dropped.
func anchor(c *cobra.Command) string {
	var out []rune
	for _, r := range strings.ToLower(path(c)) {
		switch {
		case r == ' ':
			out = append(out, '-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			out = append(out, r)
		}
	}
	return string(out)
}
