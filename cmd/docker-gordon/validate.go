package main

import (
	"errors"
	"fmt"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

func newValidateCommand(env *cliEnv) *cobra.Command {
	var file, format string
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check a manifest and report every problem at once",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("validate: -f FILE is required (the app manifest, TOML)")
			}
			spec, _, err := manifest.Load(file)
			var merr *manifest.ManifestError
			if errors.As(err, &merr) {
				if isJSON(format) {
					_ = writeJSON(env.dockerCli.Out(), merr)
				} else {
					fmt.Fprintln(env.dockerCli.Err(), merr.Error())
				}
				return cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("%s: %d problem(s)", file, len(merr.Problems))}
			}
			if err != nil {
				return err
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), spec)
			}
			fmt.Fprintf(env.dockerCli.Out(), "%s: ok (app %s, %d service(s))\n", file, spec.Name, len(spec.Services))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "app manifest (TOML)")
	addFormatFlag(cmd, &format)
	return cmd
}
