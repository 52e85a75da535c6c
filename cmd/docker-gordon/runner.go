package main

// The runner side of a remote verb (remote.go), and the bundle the CLI sends
// it: the runner reads the bundle from its stdin before the CLI framework
// starts, writes the files under remote.RunnerInputDir, keeps registry credentials
// in memory only, and then watches stdin: its end (the CLI's Ctrl-C, a kill
// of the CLI, a lost connection) is SIGTERM to itself, which interrupts the
// verb as it interrupts a local one (SPEC R45–R48 converge the rest).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gordon-deploy/docker-gordon/core/manifest"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/remote"
)

// registryAuth is engine.Engine.RegistryAuth: the X-Registry-Auth value for
// pulling ref from the CLI's own credentials (docker login, credential
// helpers, credsStore); in a runner, from what the CLI sent. "" when there
// are none.
func (e *cliEnv) registryAuth(ref string) string {
	if remote.Current() != nil {
		return remote.Current().Auth[remote.RegistryHost(ref)]
	}
	tok, err := command.RetrieveAuthTokenFromImage(e.dockerCli.ConfigFile(), ref)
	if err != nil {
		e.logger.Warn("registry credentials unavailable; pulling anonymously", "image", ref, "error", err)
		return ""
	}
	return tok
}

// runnerManifestDir is where the deploy's manifest lands in the runner.
const runnerManifestDir = "manifest"

// prepareBundle collects what the remote verb needs and rewrites its command
// line. For deploy -f it loads the input here with the loader a local
// deploy uses (a TOML manifest or a compose project: its files, .env,
// --env-file, --profile, --project-name, --project-directory) and sends ONE
// TOML manifest: the file as is, or the compose project's converted
// manifest (what convert prints), plus the values of its file: and
// environment: secrets in memory; the compose flags are consumed here and
// the runner gets --file=<its path> once. Input problems are reported here,
// as locally, before the engine is touched. Also: custom plugins of
// --plugin-dir (static Linux executables only), the value of secrets set,
// registry credentials for the images the input names. Only the builds of
// a deploy -f talk to the engine (remoteBuilds).
func prepareBundle(ctx context.Context, cmd *cobra.Command, e *cliEnv, args []string, p remote.ServerPaths) (remote.Call, error) {
	var rc remote.Call
	b := &rc.Bundle
	drop := map[string]bool{"state-dir": true}
	var extra []string
	verb := strings.Join(verbPath(cmd), " ")
	f := cmd.Flags()

	if f.Changed("plugin-dir") {
		drop["plugin-dir"] = true
		dirs, err := f.GetStringArray("plugin-dir")
		if err != nil {
			return rc, err
		}
		n, err := remote.BundlePlugins(b, dirs, p.Arch, e.dockerCli.Err())
		if err != nil {
			return rc, err
		}
		if n > 0 {
			extra = append(extra, "--plugin-dir="+remote.RunnerInputDir+"/plugins")
		}
	}

	if err := remote.ShipFlagFiles(cmd.Flags(), verb, b, drop, &extra, system.ReadCertFile); err != nil {
		return rc, err
	}
	var images []string
	pulls := false
	switch verb {
	case "deploy":
		pulls = true
		var err error
		if images, err = prepareDeployInput(ctx, e, f, &rc, drop, &extra); err != nil {
			return rc, err
		}
	case "start", "restart", "rollback", "scale", "reconcile", "system start":
		// system start on a swarm pushes the edge's image (swarm.go).
		pulls = true
	case "secrets set":
		in := e.dockerCli.In()
		if in.IsTerminal() {
			fmt.Fprintf(e.dockerCli.Err(), "reading the value of %s from standard input (end with Ctrl-D)\n", args[2])
		}
		data, err := io.ReadAll(io.LimitReader(in, maxSecretSize+1))
		if err != nil {
			return rc, fmt.Errorf("secrets set: read standard input: %w", err)
		}
		b.Stdin = data
	}
	if pulls {
		b.RegistryAuth = remote.ClientRegistryAuth(e.dockerCli.ConfigFile(), images, e.logger)
	}
	rc.Args = remote.RunnerArgs(verbPath(cmd), cmd.Flags(), args, drop, extra)
	return rc, nil
}

// inputFlagNames are the flags of addInputFlags: the client consumes them
// all for a remote deploy -f (the runner gets one --file).
var inputFlagNames = []string{"file", "env-file", "profile", "project-name", "project-directory"}

// inputOptionsFromFlags reads the addInputFlags flags of a parsed command
// (errors when the command lacks one or it has another type).
func inputOptionsFromFlags(f *pflag.FlagSet) (inputOptions, error) {
	var o inputOptions
	var err error
	get := func(name string, dst *[]string) {
		if err == nil {
			*dst, err = f.GetStringArray(name)
		}
	}
	get("file", &o.files)
	get("env-file", &o.envFiles)
	get("profile", &o.profiles)
	if err == nil {
		o.projectName, err = f.GetString("project-name")
	}
	if err == nil {
		o.projectDir, err = f.GetString("project-directory")
	}
	if err != nil {
		return o, fmt.Errorf("read the input flags: %w", err)
	}
	return o, nil
}

// errNoCopyWithoutFile is deploy --copy-images without a manifest.
var errNoCopyWithoutFile = errors.New("deploy --copy-images needs -f FILE: the images to copy are the ones the manifest or compose project names; nothing was changed")

// prepareDeployInput is prepareBundle's part for deploy: with -f, the
// input loaded here, its services built on the target engine (build.go,
// remoteBuilds), and one TOML manifest naming the built images (no build
// tables) added to the bundle. It returns the images the manifest names.
func prepareDeployInput(ctx context.Context, e *cliEnv, f *pflag.FlagSet, rc *remote.Call, drop map[string]bool, extra *[]string) ([]string, error) {
	b := &rc.Bundle
	o, err := inputOptionsFromFlags(f)
	if err != nil {
		return nil, err
	}
	copyImages, err := f.GetBool("copy-images")
	if err != nil {
		return nil, err
	}
	dryRun, err := f.GetBool("dry-run")
	if err != nil {
		return nil, err
	}
	drop["copy-images"] = true
	if copyImages && len(o.files) == 0 {
		return nil, errNoCopyWithoutFile
	}
	if len(o.files) == 0 {
		return nil, nil
	}
	for _, name := range inputFlagNames {
		drop[name] = true
	}
	in, err := loadInput(ctx, e, "deploy", o, "")
	if err != nil {
		return nil, err
	}
	built, err := remoteBuilds(ctx, e, f, in, dryRun, drop)
	if err != nil {
		return nil, err
	}
	var file remote.File
	if in.compose != nil {
		file = remote.File{Path: runnerManifestDir + "/" + in.spec.Name + ".toml", Mode: 0o600, Data: in.compose.Manifest}
		if !dryRun {
			// A dry run stores nothing, so it reads no secret.
			if b.Secrets, err = remote.SecretValues(in.compose.Secrets); err != nil {
				return nil, fmt.Errorf("deploy: %w; nothing was changed", err)
			}
		}
	} else {
		data, err := os.ReadFile(o.files[0])
		if err != nil {
			return nil, fmt.Errorf("deploy: %w", err)
		}
		file = remote.File{Path: runnerManifestDir + "/" + filepath.Base(o.files[0]), Mode: 0o600, Data: data}
	}
	if file.Data, err = manifest.WithBuiltImages(file.Data, built); err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	b.Files = append(append(b.Files, remote.ProjectFiles(in.spec, runnerManifestDir)...), file)
	*extra = append(*extra, "--file="+remote.RunnerInputDir+"/"+file.Path)
	images := remote.SpecImages(in.spec)
	rc.Images, rc.CopyImages, rc.ShipImages = images, copyImages, !dryRun
	return images, nil
}

// remoteBuilds runs the builds of in's services through the Docker
// context's API client, so the context travels to the target engine and
// the image is built where it runs (a dry run only computes the tags). It
// drops --build and --no-build from the runner's command line (the runner
// gets a manifest that names images only) and returns service → image.
func remoteBuilds(ctx context.Context, e *cliEnv, f *pflag.FlagSet, in *appInput, dryRun bool, drop map[string]bool) (map[string]string, error) {
	drop["build"], drop["no-build"] = true, true
	o := deployOptions{dryRun: dryRun}
	var err error
	for _, fl := range []struct {
		name string
		dst  *bool
	}{{"build", &o.build}, {"no-build", &o.noBuild}, {"quiet", &o.quiet}} {
		if err == nil {
			*fl.dst, err = f.GetBool(fl.name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read the build flags: %w", err)
	}
	if o.build && o.noBuild {
		return nil, errors.New("deploy: give --build (rebuild) or --no-build (never build), not both")
	}
	done, err := deployBuilds(ctx, e, o, in)
	if err != nil {
		return nil, err
	}
	built := map[string]string{}
	for _, bi := range done {
		if s, ok := in.spec.Service(bi.Service); ok {
			built[bi.Service] = s.Image
		}
	}
	return built, nil
}
