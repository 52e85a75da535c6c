package main

import (
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/engine/prune"
	sysprune "github.com/gordon-deploy/docker-gordon/system/prune"
)

func newRemoveCommand(env *cliEnv) *cobra.Command {
	var o lifecycleOptions
	cmd := &cobra.Command{
		Use:     "remove APP",
		Aliases: []string{"rm"},
		Short:   "Remove an app: stop and remove its containers and forget it (volumes and secrets are kept)",
		Long: `Remove an app. Every container (including superseded ones awaiting
retirement) is stopped with its grace and removed; only when all are gone is
the app forgotten: a later deploy of the same name starts afresh. Named
volumes and secrets are never deleted: they stay archived, and a new app of
the same name does not see them. Revisions and the operation
journal are kept for history.

Exit status: 0 success, 1 failed (the app is then left as it was, stopped).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLifecycle(cmd, env, "remove", (*engine.Engine).Remove, o, args[0])
		},
	}
	addLifecycleFlags(cmd, &o, false)
	return cmd
}

func newPruneCommand(env *cliEnv) *cobra.Command {
	var format string
	req := prune.Request{}
	cmd := &cobra.Command{
		Use: "prune [APP]", Short: sysprune.Short, Long: sysprune.Long,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.App = append(args, "")[0]
			eng, err := env.engine(cmd.Context(), "prune")
			if err != nil {
				return err
			}
			return sysprune.Verb(cmd.Context(), eng, env.dockerCli.Client(), env.store, req, isJSON(format), env.dockerCli.Out())
		},
	}
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "list what would be removed; remove nothing")
	cmd.Flags().IntVar(&req.KeepImages, "keep", prune.DefaultKeepImages, "earlier built images kept per service besides the serving one")
	addFormatFlag(cmd, &format)
	return cmd
}
