package main

// Remote engines: which verbs run in a runner container on the engine's
// machine (system/remote), and the command line and bundle the runner gets.
// An engine reached through a unix socket on this machine is local and
// every verb runs here.

import (
	"fmt"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/remote"
)

// resolveTarget reads the engine the docker CLI is pointed at (--context,
// DOCKER_CONTEXT, DOCKER_HOST, the current context).
func resolveTarget(dockerCli command.Cli) remote.Target {
	return remote.NewTarget(dockerCli.CurrentContext(), dockerCli.DockerEndpoint().Host)
}

// verbPath is the command's path below the gordon root ("edge", "start");
// empty for the root itself. (Under the docker CLI the root's parent is
// "docker".)
func verbPath(cmd *cobra.Command) []string {
	var path []string
	for c := cmd; c != nil && c.Name() != "gordon"; c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}
	return path
}

// localOnly are the verbs that need no engine: they always run here
// (validate and convert read the -f files of this machine).
func localOnly(cmd *cobra.Command) bool {
	path := verbPath(cmd)
	if len(path) == 0 {
		return true // the root: help, or an unknown verb
	}
	switch path[0] {
	case "version", "validate", "convert", "help", "completion", "__complete", "__completeNoDesc":
		return true
	}
	return false
}

// routeEngine runs before every verb: it prints the verb's first progress
// line (the engine it acts on) unless that is the local default engine or
// --quiet is given, and, for a remote engine, turns the verb into
// a runner-container run. In a runner the engine is local by construction
// and the CLI that started it has already named the engine.
func (e *cliEnv) routeEngine(cmd *cobra.Command) error {
	if remote.Current() != nil || localOnly(cmd) {
		return nil
	}
	t := resolveTarget(e.dockerCli)
	e.target = t
	if quiet, _ := cmd.Flags().GetBool("quiet"); !quiet && (t.Remote || t.Context != "default") {
		// The engine is named when it is not the local default one.
		fmt.Fprintf(e.dockerCli.Err(), "engine: %s\n", t)
	}
	if !t.Remote {
		if !e.platform().NeedsRunner(remote.Current() != nil) || cmd.Annotations[annotationRemoteSelf] == "true" {
			return nil
		}
		// A swarm's state directory: the verb runs in a runner on the
		// edge overlay, as for a remote engine (swarm.go).
		cmd.Run = nil
		cmd.RunE = func(cmd *cobra.Command, args []string) error { return runRemote(cmd, e, args) }
		return nil
	}
	if cmd.Flags().Changed("state-dir") {
		return fmt.Errorf("--state-dir applies to a local engine only: the state of %s lives on that engine's machine (in %s there, or the path its engine label %s names); nothing was changed",
			t, remote.DefaultServerStateDir, remote.EngineLabelStateDir)
	}
	if cmd.Annotations[annotationRemoteSelf] == "true" {
		// A verb marked remote-self (exec) reaches the engine itself.
		return nil
	}
	cmd.Run = nil
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return runRemote(cmd, e, args) }
	return nil
}

// runRemote runs the verb in a runner container on the target engine.
func runRemote(cmd *cobra.Command, e *cliEnv, args []string) error {
	return runRemoteTo(cmd, e, args, e.streams())
}

// runRemoteTo is runRemote with the runner's output sent to s.
func runRemoteTo(cmd *cobra.Command, e *cliEnv, args []string, s remote.Streams) error {
	ctx, api, t := cmd.Context(), e.dockerCli.Client(), e.target
	paths, err := remote.ServerPathsFor(ctx, api, t, e.opts.stateDir)
	if err != nil {
		return err
	}
	rc, err := prepareBundle(ctx, cmd, e, args, paths)
	if err != nil {
		return err
	}
	edge, _ := system.FindEdgeBinary()
	code, err := remote.Dispatch(ctx, s, api, t, paths, rc, e.registryAuth, edge)
	if err != nil {
		return err
	}
	if code != 0 {
		// The runner has said why on stderr already.
		return cli.StatusError{StatusCode: code}
	}
	return nil
}

// streams are the CLI's output and logger for a runner.
func (e *cliEnv) streams() remote.Streams {
	return remote.Streams{Out: e.dockerCli.Out(), Err: e.dockerCli.Err(), Logger: e.logger}
}
