package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// pluginRow is one line of `plugins ls`.
type pluginRow struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Source   string `json:"source"` // "built-in" or the executable's path
	Protocol int    `json:"protocol,omitempty"`
	Version  string `json:"version,omitempty"`
	Status   string `json:"status"` // "ok" or the error
	// StartMS is start + handshake + Describe, in milliseconds.
	StartMS float64 `json:"start_ms"`
}

func newPluginsCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "plugins", Short: "Backend plugins (runtime, probe, traffic)"}
	var format string
	ls := &cobra.Command{
		Use:   "ls",
		Short: "Launch every plugin found, ask it to Describe itself, and list them",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, err := env.pluginHost()
			if err != nil {
				return err
			}
			var rows []pluginRow
			failed := 0
			for _, f := range host.List() {
				row := pluginRow{Kind: f.Kind, Name: f.Name, Source: f.Path}
				if f.Builtin {
					row.Source = "built-in"
				}
				if f.Shadowed {
					// Never launched: a built-in or an earlier directory has
					// the same kind/name.
					row.Status = "shadowed"
					rows = append(rows, row)
					continue
				}
				ctx, cancel := withTimeout(cmd.Context(), 15*time.Second)
				t0 := time.Now()
				info, err := host.Describe(ctx, f.Kind, f.Name)
				cancel()
				row.StartMS = float64(time.Since(t0).Microseconds()) / 1000
				if err != nil {
					row.Status = err.Error()
					failed++
				} else {
					row.Status = "ok"
					row.Protocol = info.ProtocolVersion
					row.Version = info.Version
				}
				rows = append(rows, row)
			}
			if isJSON(format) {
				if err := writeJSON(env.dockerCli.Out(), rows); err != nil {
					return err
				}
			} else {
				tw := newTable(env.dockerCli.Out())
				fmt.Fprintln(tw, "KIND\tNAME\tSOURCE\tPROTOCOL\tSTATUS\tSTART")
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%.1fms\n", r.Kind, r.Name, r.Source, r.Protocol, r.Status, r.StartMS)
				}
				tw.Flush()
			}
			if failed > 0 {
				return fmt.Errorf("%d plugin(s) failed to start; run with --debug to see their stderr", failed)
			}
			return nil
		},
	}
	addFormatFlag(ls, &format)
	cmd.AddCommand(ls)
	return cmd
}
