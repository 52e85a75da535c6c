package main

import (
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func newRestartCommand(env *cliEnv) *cobra.Command {
	var o lifecycleOptions
	cmd := &cobra.Command{
		Use:   "restart APP [--service S]",
		Short: "Restart services (stateless: a fresh container beside the old one; others in place)",
		Long: `Restart an app's services (or only --service ones) in dependency order.
A stateless service (one that deploys with an overlap) gets a fresh container
of the same pinned image and spec beside the old one: once it is ready, traffic
switches to it and the old one is drained and stopped with its stop grace, so
nothing is refused. Any other service restarts in place: it is withdrawn from
the edge (a volume-backed service's requests are held meanwhile, not refused),
restarted with its stop grace, its binds re-read and its readiness checked,
then routed again. A container that no longer exists is rebuilt from its
pinned revision and digest.

Exit status: 0 success, 2 partial, 1 failed.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLifecycle(cmd, env, "restart", (*engine.Engine).Restart, o, args[0])
		},
	}
	addLifecycleFlags(cmd, &o, true)
	return cmd
}
