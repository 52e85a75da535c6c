package main

import (
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func newStopCommand(env *cliEnv) *cobra.Command {
	var o lifecycleOptions
	cmd := &cobra.Command{
		Use:   "stop APP",
		Short: "Stop an app: withdraw its routes, stop and remove its containers (volumes, secrets and state are kept)",
		Long: `Stop an app. The stopped intent is recorded first, so nothing revives the
app until "docker gordon start APP". Each service is withdrawn from the edge,
then its container is stopped with its stop grace and removed; superseded
containers still waiting for retirement are retired too. The serving
revisions and image digests are kept: start rebuilds exactly what was serving.

Exit status: 0 success, 2 partial, 1 failed.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLifecycle(cmd, env, "stop", (*engine.Engine).Stop, o, args[0])
		},
	}
	addLifecycleFlags(cmd, &o, false)
	return cmd
}
