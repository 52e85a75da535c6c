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
	"github.com/docker/cli/cli/config/credentials"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/manifest"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/image"
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

// clientRegistryAuth resolves the credentials the runner may need: for the
// images a manifest names when there is one, else for every registry the
// CLI has credentials for (the verb may pull any pinned image again).
func clientRegistryAuth(e *cliEnv, images []string) map[string]string {
	out := map[string]string{}
	cfg := e.dockerCli.ConfigFile()
	if images != nil {
		for _, img := range images {
			host := remote.RegistryHost(img)
			if host == "" || out[host] != "" {
				continue
			}
			ac, err := cfg.GetAuthConfig(host)
			if err != nil || (ac.Username == "" && ac.IdentityToken == "" && ac.RegistryToken == "" && ac.Auth == "") {
				continue
			}
			if tok, err := command.RetrieveAuthTokenFromImage(cfg, img); err == nil {
				out[host] = tok
			}
		}
		return out
	}
	all, err := cfg.GetAllCredentials()
	if err != nil {
		e.logger.Warn("registry credentials unavailable", "error", err)
		return out
	}
	for key := range all {
		host := credentials.ConvertToHostname(key)
		if host == "index.docker.io" {
			host = "docker.io"
		}
		if tok, err := command.RetrieveAuthTokenFromImage(cfg, host+"/x"); err == nil {
			out[host] = tok
		}
	}
	return out
}

// remoteCall is a verb prepared for the runner: what goes over its stdin,
// its command line, and the images to check (and with copyImages send)
// on the target engine before it starts.
type remoteCall struct {
	bundle     remote.Bundle
	args       []string
	images     []string
	shipImages bool
	copyImages bool
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
func prepareBundle(ctx context.Context, cmd *cobra.Command, e *cliEnv, args []string, p remote.ServerPaths) (remoteCall, error) {
	var rc remoteCall
	b := &rc.bundle
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
		n, err := bundlePlugins(e, b, dirs, p.Arch)
		if err != nil {
			return rc, err
		}
		if n > 0 {
			extra = append(extra, "--plugin-dir="+remote.RunnerInputDir+"/plugins")
		}
	}

	if err := shipFlagFiles(cmd, verb, b, drop, &extra); err != nil {
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
		b.RegistryAuth = clientRegistryAuth(e, images)
	}
	rc.args = runnerArgs(cmd, args, drop, extra)
	return rc, nil
}

// clientFileFlags are the flags that name a file of the client's machine
// (edge start / system start --acme-ca-root, certs add --cert and --key):
// a remote verb reads the file here and the runner gets its copy, like the
// other inputs.
var clientFileFlags = []string{"acme-ca-root", "cert", "key"}

// shipFlagFiles reads the file of each clientFileFlags flag given to cmd
// (at most maxCertFile bytes), adds it to b under flagfiles/<flag>/ and
// gives the runner the flag with that copy's path instead. An unreadable
// file is refused here (ErrInvalid naming the flag), before the engine is
// touched.
func shipFlagFiles(cmd *cobra.Command, verb string, b *remote.Bundle, drop map[string]bool, extra *[]string) error {
	for _, name := range clientFileFlags {
		fl := cmd.Flags().Lookup(name)
		if fl == nil || !fl.Changed || fl.Value.String() == "" {
			continue
		}
		path := fl.Value.String()
		data, err := system.ReadCertFile(name, path)
		if err != nil {
			return fmt.Errorf("%s: %w; nothing was changed", verb, err)
		}
		rel := "flagfiles/" + name + "/" + filepath.Base(path)
		b.Files = append(b.Files, remote.File{Path: rel, Mode: 0o600, Data: data})
		drop[name] = true
		*extra = append(*extra, "--"+name+"="+remote.RunnerInputDir+"/"+rel)
	}
	return nil
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

// specImages lists the images an app's services name, in service order
// (duplicates kept; shipImages skips repeats).
func specImages(spec core.AppSpec) []string {
	images := make([]string, 0, len(spec.Services))
	for _, s := range spec.Services {
		images = append(images, s.Image)
	}
	return images
}

// bundlePlugins adds the custom plugins (gordon-<kind>-<name>) of dirs that
// are static Linux executables for arch; others are named on stderr and
// left out (they could not run on the server). It returns how many it added.
func bundlePlugins(e *cliEnv, b *remote.Bundle, dirs []string, arch string) (int, error) {
	n := 0
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return n, fmt.Errorf("--plugin-dir %s: %w", dir, err)
		}
		for _, ent := range entries {
			if ent.IsDir() || !strings.HasPrefix(ent.Name(), "gordon-") {
				continue
			}
			full := filepath.Join(dir, ent.Name())
			fi, err := os.Stat(full)
			if err != nil || fi.Mode().Perm()&0o111 == 0 {
				continue
			}
			data, err := os.ReadFile(full)
			if err != nil {
				return n, fmt.Errorf("plugin %s: %w", full, err)
			}
			if why := image.StaticLinuxExecutable(data, arch); why != "" {
				fmt.Fprintf(e.dockerCli.Err(), "warning: plugin %s is not sent to the engine: %s (only static Linux executables run in the runner)\n", full, why)
				continue
			}
			b.Files = append(b.Files, remote.File{Path: "plugins/" + ent.Name(), Mode: 0o755, Data: data})
			n++
		}
	}
	return n, nil
}

// errNoCopyWithoutFile is deploy --copy-images without a manifest.
var errNoCopyWithoutFile = errors.New("deploy --copy-images needs -f FILE: the images to copy are the ones the manifest or compose project names; nothing was changed")

// prepareDeployInput is prepareBundle's part for deploy: with -f, the
// input loaded here, its services built on the target engine (build.go,
// remoteBuilds), and one TOML manifest naming the built images (no build
// tables) added to the bundle. It returns the images the manifest names.
func prepareDeployInput(ctx context.Context, e *cliEnv, f *pflag.FlagSet, rc *remoteCall, drop map[string]bool, extra *[]string) ([]string, error) {
	b := &rc.bundle
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
			for _, s := range in.compose.Secrets {
				v, err := s.Value()
				if err != nil {
					return nil, fmt.Errorf("deploy: %w; nothing was changed", err)
				}
				b.Secrets = append(b.Secrets, remote.SecretValue{Service: s.Service, Name: s.Name, Value: v})
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
	images := specImages(in.spec)
	rc.images, rc.copyImages, rc.shipImages = images, copyImages, !dryRun
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
