package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/streams"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
	"github.com/gordon-deploy/docker-gordon/system/remote"
)

type execOptions struct {
	instance    int
	interactive bool
	noTTY       bool
	user        string
	workdir     string
	env         []string
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
	f.BoolVarP(&o.interactive, "interactive", "i", false, "pass stdin even when it is not a terminal")
	f.BoolVarP(&o.noTTY, "no-tty", "T", false, "no terminal, even when stdin is one")
	f.StringVarP(&o.user, "user", "u", "", "user to run the command as (name or uid[:gid])")
	f.StringVarP(&o.workdir, "workdir", "w", "", "working directory in the container")
	f.StringArrayVarP(&o.env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
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
	return execIn(ctx, env.dockerCli, id, argv, o, fmt.Sprintf("%s/%s", app, service))
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
	api := env.dockerCli.Client()
	paths, err := remote.ReadServerPaths(ctx, api)
	if err != nil {
		return "", err
	}
	img, err := runnerImage(ctx, api)
	if err != nil {
		return "", fmt.Errorf("runner image on %s: %w", env.target, err)
	}
	var out strings.Builder
	capture := *env
	capture.dockerCli = outCapture{Cli: env.dockerCli, out: streams.NewOut(&out)}
	args := []string{"gordon", "exec", "--print-container", fmt.Sprintf("--instance=%d", instance), app, service, "--", "true"}
	code, err := remote.Run(ctx, capture.streams(), api, env.target, img.Ref, paths, args, remote.Bundle{})
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", cli.StatusError{StatusCode: code}
	}
	id := strings.TrimSpace(out.String())
	if id == "" || strings.ContainsAny(id, " \n") {
		return "", fmt.Errorf("exec %s %s: the runner on %s named no serving container (it said %q)", app, service, env.target, id)
	}
	return id, nil
}

// outCapture is a docker CLI whose stdout goes to out.
type outCapture struct {
	command.Cli
	out *streams.Out
}

func (c outCapture) Out() *streams.Out { return c.out }

// execIn runs argv in container id through dcli's engine connection: a TTY
// (and stdin) when stdin is a terminal and -T is not given, stdin alone
// with -i; it returns the command's exit status as a cli.StatusError (nil
// for 0).
func execIn(ctx context.Context, dcli command.Cli, id string, argv []string, o execOptions, what string) error {
	api := dcli.Client()
	insp, err := api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("exec %s: container %s: %w", what, shortID(id), dockererr.Classify(err))
	}
	if insp.Container.State == nil || !insp.Container.State.Running {
		return fmt.Errorf("exec %s: container %s is not running (see docker gordon status; the reconcile pass or docker gordon start brings it back)", what, shortID(id))
	}
	in := dcli.In()
	tty := !o.noTTY && in.IsTerminal()
	withStdin := tty || o.interactive
	opts := client.ExecCreateOptions{Cmd: argv, TTY: tty, AttachStdin: withStdin, AttachStdout: true, AttachStderr: true,
		User: o.user, WorkingDir: o.workdir, Env: o.env}
	if tty {
		h, w := dcli.Out().GetTtySize()
		opts.ConsoleSize = client.ConsoleSize{Height: h, Width: w}
	}
	created, err := api.ExecCreate(ctx, id, opts)
	if err != nil {
		return fmt.Errorf("exec %s: %w", what, dockererr.Classify(err))
	}
	att, err := api.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: tty, ConsoleSize: opts.ConsoleSize})
	if err != nil {
		return fmt.Errorf("exec %s: attach: %w", what, dockererr.Classify(err))
	}
	defer att.Close()
	if tty {
		if err := in.SetRawTerminal(); err == nil {
			defer in.RestoreTerminal()
		}
	}
	if withStdin {
		go func() {
			_, _ = io.Copy(att.Conn, in)
			_ = att.CloseWrite()
		}()
	}
	if tty {
		_, err = io.Copy(dcli.Out(), att.Reader)
	} else {
		_, err = stdcopy.StdCopy(dcli.Out(), dcli.Err(), att.Reader)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("exec %s: stream: %w", what, err)
	}
	res, err := api.ExecInspect(context.WithoutCancel(ctx), created.ID, client.ExecInspectOptions{})
	if err != nil {
		return fmt.Errorf("exec %s: exit status: %w", what, dockererr.Classify(err))
	}
	if res.ExitCode != 0 {
		return cli.StatusError{StatusCode: res.ExitCode}
	}
	return nil
}
