package main

// Remote engines: which verbs run in a runner container on the engine's
// machine (system/remote), and the command line and bundle the runner gets.
// An engine reached through a unix socket on this machine is local and
// every verb runs here.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/moby/moby/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/image"
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
// line (the engine it acts on) and, for a remote engine, turns the verb into
// a runner-container run. In a runner the engine is local by construction
// and the CLI that started it has already named the engine.
func (e *cliEnv) routeEngine(cmd *cobra.Command) error {
	if remote.Current() != nil || localOnly(cmd) {
		return nil
	}
	t := resolveTarget(e.dockerCli)
	e.target = t
	fmt.Fprintf(e.dockerCli.Err(), "engine: %s\n", t)
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

// runnerArgs rebuilds the verb's command line for the runner from what
// cobra parsed: the verb path, every flag the user set (repeatable flags
// once per value) except those the client consumes (drop) or rewrites
// (extra), then the positional arguments.
func runnerArgs(cmd *cobra.Command, args []string, drop map[string]bool, extra []string) []string {
	out := append([]string{"gordon"}, verbPath(cmd)...)
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if drop[f.Name] {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	out = append(out, extra...)
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			out = append(out, "--")
			break
		}
	}
	return append(out, args...)
}

// runRemote runs the verb in a runner container on the target engine.
func runRemote(cmd *cobra.Command, e *cliEnv, args []string) error {
	return runRemoteTo(cmd, e, args, e.streams())
}

// runRemoteTo is runRemote with the runner's output sent to s.
func runRemoteTo(cmd *cobra.Command, e *cliEnv, args []string, s remote.Streams) error {
	ctx := cmd.Context()
	api := e.dockerCli.Client()
	t := e.target
	t0 := time.Now()
	paths, err := remote.ReadServerPaths(ctx, api)
	if err != nil {
		return err
	}
	if !t.Remote {
		// This machine's engine, a swarm manager: same paths as here.
		paths.StateDir, paths.Socket = e.opts.stateDir, strings.TrimPrefix(t.Host, "unix://")
	}
	rc, err := prepareBundle(ctx, cmd, e, args, paths)
	if err != nil {
		return err
	}
	if paths.Network != "" && rc.copyImages {
		return fmt.Errorf("--copy-images: %s is a swarm manager and every node pulls an instance's image by digest from a registry; an image sent to the manager alone reaches no other node: push it to a registry the nodes can pull from; nothing was changed: %w", t, core.ErrInvalid)
	}
	if rc.shipImages && paths.Network == "" {
		if err := remote.ShipImages(ctx, e.dockerCli.Err(), api, t, rc.images, rc.copyImages, e.registryAuth); err != nil {
			return err
		}
	}
	b, runArgs := rc.bundle, rc.args
	img, err := runnerImage(ctx, api)
	if err != nil {
		return fmt.Errorf("runner image on %s: %w", t, err)
	}
	if img.Built {
		fmt.Fprintf(e.dockerCli.Err(), "built the runner image %s on %s in %s (once per version)\n", img.Ref, t.Context, time.Since(t0).Round(time.Millisecond))
		remote.PruneRunnerImages(ctx, api, img.ID)
	}
	e.logger.Debug("runner", "image", img.Ref, "args", runArgs, "state_dir", paths.StateDir, "socket", paths.Socket)
	code, err := remote.Run(ctx, s, api, t, img.Ref, paths, runArgs, b)
	e.logger.Debug("runner finished", "exit", code, "elapsed", time.Since(t0))
	if err != nil {
		return err
	}
	if code != 0 {
		// The runner has said why on stderr already.
		return cli.StatusError{StatusCode: code}
	}
	return nil
}

// runnerImage is remote.RunnerImage with the gordon-edge binary installed
// beside this one (none: the runner image has no edge binary).
func runnerImage(ctx context.Context, api client.APIClient) (image.Image, error) {
	edge, _ := system.FindEdgeBinary()
	return remote.RunnerImage(ctx, api, edge)
}

// streams are the CLI's output and logger for a runner.
func (e *cliEnv) streams() remote.Streams {
	return remote.Streams{Out: e.dockerCli.Out(), Err: e.dockerCli.Err(), Logger: e.logger}
}
