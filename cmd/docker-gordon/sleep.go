package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func newSleepCommand(env *cliEnv) *cobra.Command {
	return sleepWakeCommand(env, "sleep", "Put an app's services to sleep now: stop their containers (not removed); the first request wakes them",
		`Put the app's services (or those named with --service) to sleep, as their
sleep_after would: each container is stopped, not removed, with its own stop
signal and grace, and the edge holds the first request or connection for
their hosts and ports, wakes them and then answers it. A service that others
depend on sleeps only with them. Journaled as op "sleep"; status shows
"asleep since …". A reboot or an engine restart keeps them asleep.

Exit status: 0 success, 2 partial, 1 failed.`, (*engine.Engine).Sleep)
}

func newWakeCommand(env *cliEnv) *cobra.Command {
	return sleepWakeCommand(env, "wake", "Wake an app's sleeping services now: start, probe and route them",
		`Wake the app's sleeping services (or those named with --service, and what they
depend on): each container is started, its readiness probed, and its routes
served again. Journaled as op "wake" with the time it took.

Exit status: 0 success, 2 partial, 1 failed.`, (*engine.Engine).Wake)
}

// sleepWakeCommand is the sleep or wake verb: flags, one engine call, the
// op's table (a line when there was nothing to do).
func sleepWakeCommand(env *cliEnv, verb, short, long string, fn func(*engine.Engine, context.Context, engine.SleepRequest) (*engine.OpResult, error)) *cobra.Command {
	var o lifecycleOptions
	cmd := &cobra.Command{
		Use: verb + " APP", Short: short, Long: long,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			did := false
			err := runLifecycle(cmd, env, verb, func(e *engine.Engine, ctx context.Context, r engine.LifecycleRequest) (*engine.OpResult, error) {
				res, err := fn(e, ctx, engine.SleepRequest{App: r.App, Services: r.Services, OpKey: r.OpKey, Reason: "docker gordon " + verb})
				did = res != nil || err != nil
				return res, err
			}, o, args[0])
			if err == nil && !did && !isJSON(o.format) {
				fmt.Fprintf(env.dockerCli.Out(), "%s: nothing to %s\n", args[0], verb)
			}
			return err
		},
	}
	addLifecycleFlags(cmd, &o, true)
	return cmd
}
