package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

type rollbackOptions struct {
	withData bool
	to       string
	pull     string
	opKey    string
	format   string
}

func newRollbackCommand(env *cliEnv) *cobra.Command {
	var o rollbackOptions
	cmd := &cobra.Command{
		Use:   "rollback APP [--to REV]",
		Short: "Deploy an earlier revision again, by the image digests it ran with",
		Long: `Roll an app back. Without --to, the target is the latest revision created
before the serving one whose manifest differs (a second rollback returns to
where the first started; right after a scale, it restores the count before
it, as the scale stored a revision). The target's manifest is stored as a new revision
whose images are pinned to the digests that revision last ran with, then
deployed like any revision (overlap or sequential, readiness, journal).

The data stays as it is unless --with-data: then each service with volumes
is replaced sequentially and its volumes are restored from the snapshot
taken before the deploy being rolled back (refused, changing nothing, when
one has none; see docs/data.md).

Exit status: 0 success, 2 partial, 1 failed.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPinnedDeploy(cmd, env, "rollback", o.pull, o.format, func(ctx context.Context, eng *engine.Engine) (*engine.DeployResult, error) {
				return eng.Rollback(ctx, engine.RollbackRequest{App: args[0], ToRevision: o.to, OpKey: o.opKey, Pull: o.pull, WithData: o.withData})
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.to, "to", "", "revision to roll back to (default: the latest one before the serving revision whose manifest differs and that once deployed)")
	f.BoolVar(&o.withData, "with-data", false, "also restore the volumes from the snapshot taken before the deploy being rolled back")
	f.StringVar(&o.pull, "pull", "missing", "image pull policy: always, missing or never")
	f.StringVar(&o.opKey, "op-key", "", "idempotency key: a repeat with the same key returns the stored result")
	cmd.Flags().BoolVarP(&env.quiet, "quiet", "q", false, "no progress lines on stderr")
	addFormatFlag(cmd, &o.format)
	return cmd
}

// runPinnedDeploy runs a verb that stores a revision pinned to digests and
// deploys it (rollback, scale): the --pull check, the engine, progress on
// stderr, the result as a table or --format json, the exit status of its
// outcome (decision 5).
func runPinnedDeploy(cmd *cobra.Command, env *cliEnv, verb, pull, format string, run func(context.Context, *engine.Engine) (*engine.DeployResult, error)) error {
	switch pull {
	case "always", "missing", "never":
	default:
		return fmt.Errorf("%s: --pull %q: want always, missing or never", verb, pull)
	}
	ctx := cmd.Context()
	eng, err := env.engine(ctx, verb)
	if err != nil {
		return err
	}
	pr := newProgressRenderer(env.dockerCli.Err(), env.dockerCli.Err().IsTerminal())
	if !env.quiet {
		eng.Progress = pr.event
	}
	res, rerr := run(ctx, eng)
	pr.finish()
	if res == nil {
		return rerr
	}
	if isJSON(format) {
		if err := writeJSON(env.dockerCli.Out(), engine.OpViewOf(res.Op)); err != nil {
			return err
		}
	} else {
		renderDeployResult(env, res)
	}
	return exitForOutcome(res.Outcome, rerr)
}
