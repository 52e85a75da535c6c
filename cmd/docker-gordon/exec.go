package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/remote"
)

type execOptions struct {
	instance int
	exec     docker.ExecOptions
	// printContainer only resolves and prints the serving container's ID
	// (what a remote exec asks its runner).
	printContainer bool
}

// annotationRemoteSelf marks a verb that reaches a remote engine itself
// instead of running whole in a runner container (routeEngine).
const annotationRemoteSelf = "gordon.remote-self"

func newExecCommand(env *cliEnv) *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec APP SERVICE [--instance N] -- CMD [ARG...]",
		Short: "Run a command in a service's serving container (docker exec), with a terminal when stdin is one",
		Long: `Run a command in the container that serves SERVICE of APP, as the journal
names it (never a candidate or a superseded container).

With stdin a terminal, the command gets a TTY and stdin (as docker exec -it);
otherwise its stdout and stderr stay apart and stdin is passed only with -i.
--instance picks an instance, numbered from 1 as status lists them (the one
used is named on stderr when the service runs several).
The exit status is the command's own.

On a remote engine (docker --context prod gordon exec ...) a runner there
reads which container serves, then the command runs through the docker
context's own connection, as docker exec does.`,
		Args:        usageArgs(cobra.MinimumNArgs(3)),
		Annotations: map[string]string{annotationRemoteSelf: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExecVerb(cmd, env, o, args)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.instance, "instance", 1, "which instance of the service, from 1 (as status lists them)")
	f.BoolVarP(&o.exec.Interactive, "interactive", "i", false, "pass stdin even when it is not a terminal")
	f.BoolVarP(&o.exec.NoTTY, "no-tty", "T", false, "no terminal, even when stdin is one")
	f.StringVarP(&o.exec.User, "user", "u", "", "user to run the command as (name or uid[:gid])")
	f.StringVarP(&o.exec.Workdir, "workdir", "w", "", "working directory in the container")
	f.StringArrayVarP(&o.exec.Env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	f.BoolVar(&o.printContainer, "print-container", false, "only print the serving container's ID")
	_ = f.MarkHidden("print-container")
	return cmd
}

// runExecVerb resolves the serving container (here, or through a runner on
// a remote engine) and runs the command in it.
func runExecVerb(cmd *cobra.Command, env *cliEnv, o execOptions, args []string) error {
	ctx := cmd.Context()
	app, service, argv := args[0], args[1], args[2:]
	if d := cmd.ArgsLenAtDash(); d >= 0 && d != 2 {
		return fmt.Errorf("exec: give APP SERVICE, then -- and the command (docker gordon exec %s -- CMD ...)", strings.Join(args[:min(d, 2)], " "))
	}
	var id string
	var err error
	if env.target.Remote && remote.Current() == nil {
		id, err = remoteServingContainer(ctx, env, app, service, o.instance)
	} else {
		id, err = localServingContainer(ctx, env, app, service, o.instance)
	}
	if err != nil {
		return err
	}
	if o.printContainer {
		_, err := fmt.Fprintln(env.dockerCli.Out(), id)
		return err
	}
	code, err := docker.Exec(ctx, env.dockerCli.Client(), env.dockerCli.In(), env.dockerCli.Out(), env.dockerCli.Err(), id, argv, o.exec, app+"/"+service)
	if err == nil && code != 0 {
		err = cli.StatusError{StatusCode: code}
	}
	return err
}

// localServingContainer resolves instance's container here, naming it on
// stderr when the service runs several.
func localServingContainer(ctx context.Context, env *cliEnv, app, service string, instance int) (string, error) {
	store, err := env.openStore()
	if err != nil {
		return "", err
	}
	id, n, err := (&engine.Engine{Store: store}).ServingContainer(ctx, app, service, instance)
	if err != nil {
		return "", err
	}
	if n > 1 {
		_, _ = fmt.Fprintf(env.dockerCli.Err(), "exec %s/%s: instance %d of %d (container %.12s); pick another with --instance N\n", app, service, instance, n, id)
	}
	return id, nil
}

// remoteServingContainer asks a runner on the remote engine which
// container serves (the journal lives there); its stderr is passed on.
func remoteServingContainer(ctx context.Context, env *cliEnv, app, service string, instance int) (string, error) {
	edge, _ := system.FindEdgeBinary()
	id, code, err := remote.ServingContainer(ctx, env.streams(), env.dockerCli.Client(), env.target, app, service, instance, edge)
	if err == nil && code != 0 {
		err = cli.StatusError{StatusCode: code}
	}
	return id, err
}
