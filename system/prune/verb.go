package prune

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/engine/prune"
)

// Short and Long are the verb's help texts.
const (
	Short = "Remove what docker gordon made and no longer needs: old containers, built images, networks of removed apps"
	Long  = `Remove what docker gordon made and no longer needs, for one app or every
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

Exit status: 0 success, 1 when something could not be removed.`
)

// Verb runs the prune on eng with the engine api and the state
// directory's archive, and writes the report to out as a table or, with
// asJSON, as one JSON document (prune.Report). An object that could not be
// removed makes the error (after the report is written).
func Verb(ctx context.Context, eng *engine.Engine, api client.APIClient, arch prune.Archive, req prune.Request, asJSON bool, out io.Writer) error {
	rep, err := eng.PruneObjects(ctx, Docker{API: api}, arch, req)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		Render(out, rep)
	}
	if err == nil && len(rep.Errors) > 0 {
		err = fmt.Errorf("prune: %s", strings.Join(rep.Errors, "; "))
	}
	return err
}
