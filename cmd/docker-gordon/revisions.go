package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func newRevisionsCommand(env *cliEnv) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "revisions APP",
		Short: "List an app's stored revisions: id, created, outcome of their last deploy, and which one serves",
		Long: `List an app's stored revisions, oldest first.

OUTCOME is the outcome of the revision's latest deploy or rollback (success,
partial, failed; pending while it runs; - when it was never deployed). VIA
is the verb of that operation: a rollback stores the revision it returns to
as a new revision (its images pinned to the digests it ran with), shown as
"rollback (rev-N)". SERVING marks the revision that serves now; SERVICES names
the services whose serving container runs each revision.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := env.openStore()
			if err != nil {
				return err
			}
			revs, err := (&engine.Engine{Store: store}).Revisions(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), revs)
			}
			renderRevisions(env, revs)
			return nil
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

func renderRevisions(env *cliEnv, revs []engine.RevisionInfo) {
	tw := newTable(env.dockerCli.Out())
	fmt.Fprintln(tw, "REVISION\tCREATED\tOUTCOME\tVIA\tOP\tSERVING\tSERVICES")
	for _, r := range revs {
		via := r.Verb
		if r.RollbackTo != "" {
			via += " (" + r.RollbackTo + ")"
		}
		serving := "-"
		if r.Serving {
			serving = "serving"
		}
		id := r.Revision
		if r.Desired {
			id += " (desired)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, r.CreatedAt.UTC().Format("2006-01-02 15:04:05"), orDash(r.Outcome), orDash(via),
			orDash(r.Op), serving, orDash(strings.Join(r.Services, ",")))
	}
	tw.Flush()
}
