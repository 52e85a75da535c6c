package dashboard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// MaxSnapshotRows bounds the snapshots table of an app page (newest
// first).
const MaxSnapshotRows = 20

// DataSections returns a Collector.Sections that adds an app's volume
// snapshots (from snaps, newest first, at most MaxSnapshotRows) and its
// scheduled jobs with their last and next run (from the journal in
// store) to the app page. A Section's Command is relative to the CLI
// ("snapshots ls blog"); the page prefixes the CLI it names. A nil snaps
// or store leaves that table out.
func DataSections(store core.Store, snaps *snapshot.Store) func(ctx context.Context, app string) ([]Section, error) {
	return func(ctx context.Context, app string) ([]Section, error) {
		var out []Section
		var errs []error
		if snaps != nil {
			s, err := snapshotSection(snaps, app)
			errs = append(errs, err)
			out = append(out, s)
		}
		if store != nil {
			s, err := jobsSection(ctx, store, app)
			errs = append(errs, err)
			out = append(out, s)
		}
		return out, errors.Join(errs...)
	}
}

func snapshotSection(snaps *snapshot.Store, app string) (Section, error) {
	s := Section{Title: "Snapshots", Columns: []string{"ID", "SERVICE", "TRIGGER", "REVISION", "TAKEN", "VOLUMES", "SIZE"},
		Empty: "No snapshot: a deploy takes one before it replaces a service with volumes.", Command: "snapshots ls " + app}
	list, err := snaps.List(app)
	if err != nil {
		return s, fmt.Errorf("snapshots: %w", err)
	}
	slices.Reverse(list)
	for _, m := range list[:min(len(list), MaxSnapshotRows)] {
		names := make([]string, 0, len(m.Volumes))
		for _, v := range m.Volumes {
			names = append(names, v.Name)
		}
		s.Rows = append(s.Rows, []string{m.ID, m.Service, m.Trigger, orDash(m.Revision), m.CreatedAt.UTC().Format(time.RFC3339), strings.Join(names, ", "), fmt.Sprintf("%.1f MiB", float64(m.Size())/(1<<20))})
	}
	if len(list) > 0 {
		s.Command = "rollback " + app + " --with-data"
	}
	return s, nil
}

func jobsSection(ctx context.Context, store core.Store, app string) (Section, error) {
	s := Section{Title: "Jobs", Columns: []string{"JOB", "SERVICE", "SCHEDULE", "LAST RUN", "OUTCOME", "NEXT RUN"},
		Empty: "No scheduled job ([jobs.NAME] in the manifest).", Command: "jobs ls " + app}
	jobs, err := (&engine.Engine{Store: store}).Jobs(ctx, app)
	if errors.Is(err, core.ErrNotFound) || errors.Is(err, core.ErrConflict) {
		return s, nil // no app, or one that serves nothing: no job can run
	}
	if err != nil {
		return s, fmt.Errorf("jobs: %w", err)
	}
	for _, j := range jobs {
		last, outcome, next := "-", "-", "-"
		if j.LastRun != nil {
			last, outcome = j.LastRun.StartedAt.UTC().Format(time.RFC3339), orDash(string(j.LastRun.Outcome))
			if j.LastRun.Outcome == "" {
				outcome = "running"
			}
		}
		if !j.Next.IsZero() {
			next = j.Next.UTC().Format(time.RFC3339)
		} else if j.Blocked != "" {
			next = "not now: " + j.Blocked
		}
		s.Rows = append(s.Rows, []string{j.Name, j.Service, j.Schedule, last, outcome, next})
	}
	return s, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
