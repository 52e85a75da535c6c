package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine/prune"
	sysprune "github.com/gordon-deploy/docker-gordon/system/prune"
)

func newPruneCommand(env *cliEnv) *cobra.Command {
	var format string
	req := prune.Request{KeepImages: prune.DefaultKeepImages}
	cmd := &cobra.Command{
		Use:   "prune [APP]",
		Short: "Remove what docker gordon made and no longer needs: old containers, built images, networks of removed apps",
		Long: `Remove what docker gordon made and no longer needs, for one app or every
app of this state directory:

  - containers of superseded generations and leftovers no record names;
  - images docker gordon built that no container uses, that the serving and
    desired revisions do not name, beyond the newest --keep earlier images
    per service (the images rollback returns to);
  - networks of removed apps with no container attached;
  - operations and revisions past the state directory's retention.

It never removes the containers of a serving generation, even stopped
(stopped and sleeping apps keep them), never a named volume (it lists the
volumes of removed apps with the command that deletes them), and nothing
without docker gordon's labels. An app whose last operation did not finish
is skipped: docker gordon reconcile APP finishes it first.

--dry-run lists exactly what the same command removes, and changes nothing.

Exit status: 0 success, 1 when something could not be removed.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				req.App = args[0]
			}
			eng, err := env.engine(cmd.Context(), "prune")
			if err != nil {
				return err
			}
			store, err := env.openStore()
			if err != nil {
				return err
			}
			rep, err := eng.PruneObjects(cmd.Context(), sysprune.Docker{API: env.dockerCli.Client()}, store, req)
			if err != nil {
				return err
			}
			if isJSON(format) {
				err = writeJSON(env.dockerCli.Out(), rep)
			} else {
				sysprune.Render(env.dockerCli.Out(), rep)
			}
			if err == nil && len(rep.Errors) > 0 {
				err = fmt.Errorf("prune: %s", strings.Join(rep.Errors, "; "))
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "list what would be removed; remove nothing")
	cmd.Flags().IntVar(&req.KeepImages, "keep", prune.DefaultKeepImages, "earlier built images kept per service besides the serving one")
	addFormatFlag(cmd, &format)
	return cmd
}
