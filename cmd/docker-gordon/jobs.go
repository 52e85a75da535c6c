package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/engine/jobs"
)

func newJobsCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List an app's scheduled jobs, or run one now",
		Long: `Scheduled jobs are the manifest's [jobs.NAME] tables. The reconcile watcher
(reconcile --watch, or the system's gordon-reconcile) runs each one when its
schedule is due, in a new container of its service's serving generation, one
run at a time. Every run is an operation of kind job in the journal (ops),
with its exit status and the last 64 KiB of its output (logs APP --job NAME).`,
	}
	cmd.AddCommand(newJobsLsCommand(env), newJobsRunCommand(env))
	return cmd
}

func newJobsLsCommand(env *cliEnv) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "ls APP",
		Short: "List an app's jobs: service, schedule, last run and its outcome, next run",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := env.openStore()
			if err != nil {
				return err
			}
			list, err := (&engine.Engine{Store: store}).Jobs(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), list)
			}
			tw := newTable(env.dockerCli.Out())
			fmt.Fprintln(tw, "JOB\tSERVICE\tSCHEDULE\tLAST RUN\tOUTCOME\tNEXT RUN")
			for _, j := range list {
				last, outcome := "-", "-"
				if j.LastRun != nil {
					last, outcome = j.LastRun.StartedAt.Local().Format("2006-01-02 15:04:05"), lastOutcome(j.LastRun)
				}
				next := "-"
				if !j.Next.IsZero() {
					next = j.Next.Local().Format("2006-01-02 15:04:05")
				} else if j.Blocked != "" {
					next = "not while " + blockedWhy(j.Blocked)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.Name, j.Service, j.Schedule, last, outcome, next)
			}
			return tw.Flush()
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

// lastOutcome is a last run's outcome for the table: "running", or the
// outcome with the exit status when the command exited non-zero.
func lastOutcome(r *engine.JobLastRun) string {
	switch {
	case r.Outcome == "":
		return "running"
	case r.ExitCode != nil && *r.ExitCode != 0:
		return fmt.Sprintf("%s (exit %d)", r.Outcome, *r.ExitCode)
	}
	return string(r.Outcome)
}

// blockedWhy shortens why a job cannot run now, for the table.
func blockedWhy(msg string) string {
	if strings.Contains(msg, "app is stopped") {
		return "stopped"
	}
	return "not serving"
}

func newJobsRunCommand(env *cliEnv) *cobra.Command {
	return &cobra.Command{
		Use:   "run APP NAME",
		Short: "Run a job now, in the foreground: its output, then its exit status as this command's",
		Long: `Run job NAME of APP now, as the watcher would: a new container of its
service's serving generation runs the job's command within its timeout, and
the run is journaled as an operation of kind job. Its output is shown as it
comes; this command exits with the command's exit status (1 when it did
not exit by itself: a timeout, an interruption). A run of the job already
going is not overlapped: the command then fails and names it.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			eng, err := env.engine(ctx, "jobs run")
			if err != nil {
				return err
			}
			out := env.dockerCli.Out()
			res, err := eng.RunJob(ctx, engine.JobRunRequest{App: args[0], Job: args[1], Trigger: jobs.TriggerManual,
				Output: func(l core.LogLine) { fmt.Fprintln(out, l.Text) }})
			if err != nil {
				return err
			}
			op := res.Op
			st := op.Steps[0]
			fmt.Fprintf(env.dockerCli.Err(), "job %s of %s: op %s, %s, outcome %s (took %s)\n", args[1], args[0], op.ID, orDash(st.Result), op.Outcome,
				op.FinishedAt.Sub(op.StartedAt).Round(time.Millisecond))
			if code, ok := jobs.ExitCode(op); ok && code != 0 {
				return cli.StatusError{StatusCode: code}
			}
			if op.Outcome != core.OutcomeSuccess {
				return errors.New(st.Error)
			}
			return nil
		},
	}
}
