// Package helptext is how docker gordon's commands describe themselves:
// the --help layout (the global flags listed once, on docker gordon
// --help, as docker and compose do) and the CLI reference docs/cli.md,
// generated from the same command tree.
package helptext

import (
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagWidth is the width flag usages are wrapped at.
const flagWidth = 80

// Install sets the usage (and so --help) template of root and every
// command under it: a subcommand's Options list its own flags only, and a
// line names the global ones (root's persistent flags), which root's own
// help lists under Global Options.
func Install(root *cobra.Command) {
	cobra.AddTemplateFunc("gordonOptions", func(c *cobra.Command) string {
		return strings.TrimRight(OwnFlags(root, c).FlagUsagesWrapped(flagWidth), " \n")
	})
	cobra.AddTemplateFunc("gordonGlobals", func(c *cobra.Command) string {
		if c == root {
			return "Global Options:\n" + strings.TrimRight(root.PersistentFlags().FlagUsagesWrapped(flagWidth), " \n")
		}
		return "Global options: " + strings.Join(globalNames(root), ", ") + " (see " + root.CommandPath() + " --help)"
	})
	root.SetUsageTemplate(usageTemplate)
}

const usageTemplate = `Usage:
{{- if not .HasSubCommands}}  {{.UseLine}}{{end}}
{{- if .HasSubCommands}}  {{.CommandPath}} COMMAND{{end}}

{{if ne .Long ""}}{{.Long | trim}}{{else}}{{.Short | trim}}{{end}}
{{- if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}
{{- end}}
{{- if .HasExample}}

Examples:
{{.Example}}
{{- end}}
{{- $opts := gordonOptions .}}{{if ne $opts ""}}

Options:
{{$opts}}
{{- end}}
{{- if .HasAvailableSubCommands}}

Commands:
{{- range .Commands}}{{if .IsAvailableCommand}}
  {{rpad .Name .NamePadding}} {{.Short}}
{{- end}}{{end}}
{{- end}}

{{gordonGlobals .}}
{{- if .HasAvailableSubCommands}}

Run '{{.CommandPath}} COMMAND --help' for more information on a command.
{{- end}}
`

// OwnFlags returns c's flags without root's persistent (global) ones and
// without hidden flags: what c's help lists under Options.
func OwnFlags(root, c *cobra.Command) *pflag.FlagSet {
	global := root.PersistentFlags()
	own := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	own.SortFlags = true
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if global.Lookup(f.Name) != nil {
			return
		}
		if f.Hidden || f.Name == "help" {
			return
		}
		own.AddFlag(f)
	})
	c.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if global.Lookup(f.Name) == nil && !f.Hidden && own.Lookup(f.Name) == nil {
			own.AddFlag(f)
		}
	})
	return own
}

func globalNames(root *cobra.Command) []string {
	var out []string
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			out = append(out, "--"+f.Name)
		}
	})
	sort.Strings(out)
	return out
}
