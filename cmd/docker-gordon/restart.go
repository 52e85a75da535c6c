package main

import (
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func newRestartCommand(env *cliEnv) *cobra.Command {
	var o lifecycleOptions
	cmd := &cobra.Command{
		Use:   "restart APP [--service S]",
		Short: "Restart services in place (withdraw, restart with stop grace, re-check readiness, route)",
		Long: `Restart an app's services (or only --service ones) in place: each is
withdrawn from the edge, restarted with its stop grace, its binds re-read and
its readiness checked, then routed again. A container that no longer exists
is rebuilt from its pinned revision and digest. The service is unavailable
while it restarts.

Exit status: 0 success, 2 partial, 1 failed.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLifecycle(cmd, env, "restart", (*engine.Engine).Restart, o, args[0])
		},
	}
	addLifecycleFlags(cmd, &o, true)
	return cmd
}
