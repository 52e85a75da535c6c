package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gordon-deploy/docker-gordon/cmd/internal/usererr"
	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"

	"github.com/spf13/cobra"
)

func newOpsCommand(env *cliEnv) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "ops APP [OP]",
		Short: "Show an app's operation journal, or one operation (its ID or a unique prefix) with its steps",
		Args:  usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, err := env.openStore()
			if err != nil {
				return err
			}
			app := args[0]
			if _, err := store.LoadApp(ctx, app); errors.Is(err, core.ErrNotFound) {
				if ops, lerr := store.ListOps(ctx, app); lerr != nil || len(ops) == 0 {
					return fmt.Errorf("app %q not found in %s (deploy it with: docker gordon deploy -f FILE)", app, env.opts.stateDir)
				}
			}
			if len(args) == 2 {
				op, err := store.LoadOp(ctx, app, args[1])
				if errors.Is(err, core.ErrNotFound) {
					ops, lerr := store.ListOps(ctx, app)
					if lerr != nil {
						return lerr
					}
					id, merr := matchOpID(app, ops, args[1])
					if merr != nil {
						return merr
					}
					op, err = store.LoadOp(ctx, app, id)
				}
				if err != nil {
					return err
				}
				if isJSON(format) {
					return writeJSON(env.dockerCli.Out(), engine.OpViewOf(op))
				}
				w := env.dockerCli.Out()
				fmt.Fprintf(w, "op %s %s app %s revision %s started %s outcome %s\n", op.ID, op.VerbOrKind(), op.App, opRevision(op), op.StartedAt.Format("2006-01-02T15:04:05Z07:00"), orDash(string(op.Outcome)))
				tw := newTable(w)
				fmt.Fprintln(tw, "STEP\tSTATE\tBEFORE\tAFTER\tDETAIL\tERROR")
				for _, s := range op.Steps {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.State, orDash(shortID(s.Before)), orDash(shortID(s.After)), orDash(s.Detail), orDash(s.Error))
				}
				tw.Flush()
				for _, wa := range op.Warnings {
					fmt.Fprintln(w, usererr.WarningLine(wa))
				}
				return nil
			}
			ops, err := store.ListOps(ctx, app)
			if err != nil {
				return err
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), engine.OpViews(ops))
			}
			tw := newTable(env.dockerCli.Out())
			fmt.Fprintln(tw, "OP\tKIND\tREVISION\tSTARTED\tOUTCOME\tSTEPS")
			for _, op := range ops {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", op.ID, strings.TrimSpace(op.VerbOrKind()+" "+engine.JobName(op)), opRevision(op), op.StartedAt.Format("2006-01-02 15:04:05"), orDash(string(op.Outcome)), len(op.Steps))
			}
			return tw.Flush()
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

// opRevision is op's revision for the ops tables: a rollback's new
// revision with the one it returns to ("rev-5 (= rev-2)"), "-" for none.
func opRevision(op core.Operation) string {
	if op.RollbackTo != "" {
		return fmt.Sprintf("%s (= %s)", orDash(op.Revision), op.RollbackTo)
	}
	return orDash(op.Revision)
}

// matchOpID resolves prefix (with or without the "op-" of every ID) to the
// one operation of ops whose ID starts with it, as docker resolves short
// container IDs. No match is
// core.ErrNotFound, several are core.ErrInvalid; both name what to do.
func matchOpID(app string, ops []core.Operation, prefix string) (string, error) {
	var hits []string
	for _, op := range ops {
		if strings.HasPrefix(op.ID, prefix) || strings.HasPrefix(op.ID, "op-"+prefix) {
			hits = append(hits, op.ID)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		return "", fmt.Errorf("app %q has no operation %q (list them with: docker gordon ops %s): %w", app, prefix, app, core.ErrNotFound)
	}
	return "", fmt.Errorf("operation prefix %q of app %q is ambiguous: %s; give more of the ID: %w", prefix, app, strings.Join(hits, ", "), core.ErrInvalid)
}
