package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newValidateCommand(env *cliEnv) *cobra.Command {
	var in inputOptions
	var format string
	cmd := &cobra.Command{
		Use:   "validate -f FILE [-f FILE...]",
		Short: "Check a manifest or a compose project and report every problem at once",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := loadInput(cmd.Context(), env, "validate", in, format)
			if err != nil {
				return err
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), res.spec)
			}
			kind := ""
			if res.compose != nil {
				kind = "compose project, "
			}
			fmt.Fprintf(env.dockerCli.Out(), "%s: ok (%sapp %s, %d service(s))\n", in.files[0], kind, res.spec.Name, len(res.spec.Services))
			return nil
		},
	}
	addInputFlags(cmd.Flags(), &in, "to check")
	addFormatFlag(cmd, &format)
	return cmd
}
