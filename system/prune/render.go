package prune

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gordon-deploy/docker-gordon/core/engine/prune"
)

// Render writes rep as the verb's table: one line per object removed
// ("removed", or "would remove" in a dry run) and kept, then the apps
// skipped and the commands that remove the kept volumes, then a summary
// line.
func Render(w io.Writer, rep *prune.Report) {
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(rep.Removed)+len(rep.Kept) > 0 {
		fmt.Fprintln(tw, "ACTION\tKIND\tAPP\tSERVICE\tNAME\tWHY")
	}
	for _, it := range rep.Removed {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", verb, it.Kind, it.App, dash(it.Service), it.Name, it.Reason)
	}
	for _, it := range rep.Kept {
		fmt.Fprintf(tw, "kept\t%s\t%s\t%s\t%s\t%s\n", it.Kind, it.App, dash(it.Service), it.Name, it.Reason)
	}
	tw.Flush()
	for _, it := range rep.Skipped {
		fmt.Fprintf(w, "skipped app %s: %s; run %s, then prune again\n", it.App, it.Reason, it.Hint)
	}
	for _, it := range rep.Kept {
		if it.Hint != "" {
			fmt.Fprintf(w, "kept %s %s: remove it with: %s\n", it.Kind, it.Name, it.Hint)
		}
	}
	switch {
	case len(rep.Removed) == 0:
		fmt.Fprintln(w, "nothing to remove")
	case rep.DryRun:
		fmt.Fprintf(w, "%s would be removed (run without --dry-run to remove them)\n", objects(len(rep.Removed)))
	default:
		fmt.Fprintf(w, "%s removed\n", objects(len(rep.Removed)))
	}
}

func objects(n int) string {
	if n == 1 {
		return "1 object"
	}
	return fmt.Sprintf("%d objects", n)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
