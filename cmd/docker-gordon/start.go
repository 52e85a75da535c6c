package main

import (
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func newStartCommand(env *cliEnv) *cobra.Command {
	var o lifecycleOptions
	cmd := &cobra.Command{
		Use:   "start APP",
		Short: "Start a stopped app as it last served: same revisions and image digests, and every declared instance (never a newer pending revision)",
		Long: `Start an app. Each service's recorded container is verified when it runs,
started when it exists, and rebuilt from its pinned revision and digest when
it is gone; its loopback binds are re-read and checked with the declared
readiness before the edge routes it. A service that fails stays unrouted.
A service that declares several instances gets its missing instances back
(created, probed, then routed beside the first).

Exit status: 0 success, 2 partial, 1 failed (any failed service).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLifecycle(cmd, env, "start", (*engine.Engine).Start, o, args[0])
		},
	}
	addLifecycleFlags(cmd, &o, false)
	return cmd
}
