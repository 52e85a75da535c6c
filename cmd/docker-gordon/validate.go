package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
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
			if ierr := checkLocalImages(cmd.Context(), env, spec); ierr != nil {
				fmt.Fprintln(env.dockerCli.Err(), ierr)
				return cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("%s: refused by its images", file)}
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

// checkLocalImages runs the engine's image checks (an unmapped image
// VOLUME, readiness "docker" without a healthcheck) for the images that
// are present on the engine. When the runtime backend cannot be reached
// the checks are skipped with a note on stderr: validate needs no engine.
func checkLocalImages(ctx context.Context, env *cliEnv, spec core.AppSpec) error {
	host, err := env.pluginHost()
	if err == nil {
		var rt core.Runtime
		if rt, err = host.Runtime(ctx, "docker"); err == nil {
			if _, err = rt.Info(ctx); err == nil {
				return (&core.Engine{Runtime: rt}).CheckImages(ctx, spec)
			}
		}
	}
	fmt.Fprintf(env.dockerCli.Err(), "note: image checks skipped (no engine: %v)\n", err)
	return nil
}
