package jobs

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// WriteTable writes list as the jobs ls table: JOB, SERVICE, SCHEDULE,
// LAST RUN, OUTCOME, NEXT RUN (Row).
func WriteTable(w io.Writer, list []JobInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSERVICE\tSCHEDULE\tLAST RUN\tOUTCOME\tNEXT RUN")
	for _, j := range list {
		fmt.Fprintln(tw, strings.Join(j.Row(), "\t"))
	}
	return tw.Flush()
}

// Row is j as the jobs ls table shows it, in local time: the last run's
// outcome is "running" while it runs and names a failure's exit status;
// the next run says why there is none.
func (j JobInfo) Row() []string {
	loc := time.Local
	last, outcome, next := "-", "-", "-"
	if r := j.LastRun; r != nil {
		last, outcome = r.StartedAt.In(loc).Format(time.DateTime), string(r.Outcome)
		switch {
		case r.Outcome == "":
			outcome = "running"
		case r.ExitCode != nil && *r.ExitCode != 0:
			outcome = fmt.Sprintf("%s (exit %d)", r.Outcome, *r.ExitCode)
		}
	}
	switch {
	case !j.Next.IsZero():
		next = j.Next.In(loc).Format(time.DateTime)
	case strings.Contains(j.Blocked, "app is stopped"):
		next = "not while stopped"
	case j.Blocked != "":
		next = "not while not serving"
	}
	return []string{j.Name, j.Service, j.Schedule, last, outcome, next}
}

// Summary is the line that names a job's run after it: its op, how the
// command ended and the outcome ("running" while it runs), with why it
// failed.
func Summary(app string, op core.Operation) string {
	outcome, took := string(op.Outcome), ""
	if outcome == "" {
		outcome = "running"
	} else {
		took = fmt.Sprintf(" (took %s)", op.FinishedAt.Sub(op.StartedAt).Round(time.Millisecond))
	}
	result := "no exit status"
	if code, ok := ExitCode(op); ok {
		result = fmt.Sprintf("exit %d", code)
	}
	why := ""
	if op.Outcome == core.OutcomeFailed && len(op.Steps) > 0 && op.Steps[0].Error != "" {
		why = ": " + op.Steps[0].Error
	}
	return fmt.Sprintf("job %s of %s: op %s started %s, %s, outcome %s%s%s", NameOf(op), app, op.ID, op.StartedAt.Format(time.RFC3339), result, outcome, took, why)
}

// ExitStatus is the exit status of a finished run for the command that
// ran it: 0 on success, the command's own when it exited non-zero, 1
// when it did not exit by itself (a timeout, an interruption).
func ExitStatus(op core.Operation) int {
	if op.Outcome == core.OutcomeSuccess {
		return 0
	}
	if code, ok := ExitCode(op); ok && code != 0 {
		return code
	}
	return 1
}
