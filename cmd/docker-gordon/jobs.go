package main

import (
	"fmt"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/engine/jobs"
)

func newJobsCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "List an app's scheduled jobs ([jobs.NAME], run by reconcile --watch), or run one now (docs/jobs.md)"}
	var format string
	ls := &cobra.Command{Use: "ls APP", Short: "List an app's jobs: service, schedule, last run and its outcome, next run", Args: usageArgs(cobra.ExactArgs(1)),
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
			return jobs.WriteTable(env.dockerCli.Out(), list)
		},
	}
	addFormatFlag(ls, &format)
	run := &cobra.Command{Use: "run APP NAME", Args: usageArgs(cobra.ExactArgs(2)),
		Short: "Run a job now, in the foreground: its output as it comes, then its exit status as this command's (1 when it did not exit by itself)",
		RunE: func(cmd *cobra.Command, args []string) error {
			eng, err := env.engine(cmd.Context(), "jobs run")
			if err != nil {
				return err
			}
			res, err := eng.RunJob(cmd.Context(), engine.JobRunRequest{App: args[0], Job: args[1], Trigger: jobs.TriggerManual,
				Output: func(l core.LogLine) { fmt.Fprintln(env.dockerCli.Out(), l.Text) }})
			if err != nil {
				return err
			}
			fmt.Fprintln(env.dockerCli.Err(), jobs.Summary(args[0], res.Op))
			if code := jobs.ExitStatus(res.Op); code != 0 {
				return cli.StatusError{StatusCode: code}
			}
			return nil
		},
	}
	cmd.AddCommand(ls, run)
	return cmd
}
