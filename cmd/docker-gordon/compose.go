package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/docker/cli/cli"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/composeapi"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/manifest"
	"github.com/gordon-deploy/docker-gordon/imagebuild"
	"github.com/gordon-deploy/docker-gordon/system/remote"
)

// inputOptions select an app's source: one TOML manifest, or a compose
// project (several -f files merged in order), told apart by content.
type inputOptions struct {
	files       []string
	envFiles    []string
	profiles    []string
	projectName string
	projectDir  string
}

// addInputFlags adds -f and the compose flags (as docker compose spells
// them) to a verb.
func addInputFlags(f *pflag.FlagSet, o *inputOptions, what string) {
	f.StringArrayVarP(&o.files, "file", "f", nil, what+": an app manifest (TOML) or compose files (repeatable, merged in order)")
	f.StringArrayVar(&o.envFiles, "env-file", nil, "compose: env file for interpolation (repeatable; default: .env in the project directory)")
	f.StringArrayVar(&o.profiles, "profile", nil, "compose: enable a profile (repeatable; default: COMPOSE_PROFILES)")
	f.StringVarP(&o.projectName, "project-name", "p", "", "compose: project (app) name; default: name: in the file, else the directory name")
	f.StringVar(&o.projectDir, "project-directory", "", "compose: project directory (default: the first file's directory)")
}

// appInput is a loaded and validated app source.
type appInput struct {
	spec core.AppSpec
	sha  string
	// compose is set for a compose project.
	compose *composeapi.Result
	// builds are the builds deploy ran (or found done) for spec.
	builds []imagebuild.Image
}

// loadInput reads the -f files: a compose project when the first file is
// compose YAML (by content, whatever its name), else a TOML manifest.
// Problems are printed to stderr (or as JSON) and returned as a refusal
// (exit 1) that says nothing was changed.
func loadInput(ctx context.Context, env *cliEnv, verb string, o inputOptions, format string) (*appInput, error) {
	if len(o.files) == 0 {
		return nil, fmt.Errorf("%s: -f FILE is required (an app manifest or a compose file)", verb)
	}
	isCompose, err := composeapi.IsComposeFile(o.files[0])
	if err != nil {
		return nil, err
	}
	if !isCompose {
		if len(o.files) > 1 {
			return nil, fmt.Errorf("%s: %s is a TOML manifest: give one manifest (several -f files are merged only for compose projects)", verb, o.files[0])
		}
		if len(o.envFiles) > 0 || len(o.profiles) > 0 || o.projectName != "" || o.projectDir != "" {
			return nil, fmt.Errorf("%s: --env-file, --profile, --project-name and --project-directory apply to compose files; %s is a TOML manifest", verb, o.files[0])
		}
		spec, sha, err := manifest.Load(o.files[0])
		if err != nil {
			var merr *manifest.ManifestError
			if errors.As(err, &merr) {
				if isJSON(format) {
					_ = writeJSON(env.dockerCli.Out(), merr)
				} else {
					fmt.Fprintln(env.dockerCli.Err(), merr.Error())
				}
				return nil, cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("%s: %s has %d problem(s); nothing was changed", verb, o.files[0], len(merr.Problems))}
			}
			return nil, err
		}
		return &appInput{spec: spec, sha: sha}, nil
	}
	res, err := loadCompose(ctx, composeapi.Request{
		Files:       o.files,
		WorkDir:     o.projectDir,
		ProjectName: o.projectName,
		EnvFiles:    o.envFiles,
		Profiles:    o.profiles,
		Binds:       env.bindPolicy(verb),
		LogLevel:    logrus.GetLevel().String(),
	})
	if err != nil {
		var cerr *composeapi.Error
		if errors.As(err, &cerr) {
			if isJSON(format) {
				_ = writeJSON(env.dockerCli.Out(), cerr)
			} else {
				fmt.Fprintln(env.dockerCli.Err(), cerr.Error())
			}
			return nil, cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("%s: the compose project has %d problem(s) docker gordon cannot honour; nothing was changed", verb, len(cerr.Problems))}
		}
		return nil, cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("%s: %v; nothing was changed", verb, err)}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(env.dockerCli.Err(), "note: %s\n", n)
	}
	return &appInput{spec: res.Spec, sha: res.Source, compose: res}, nil
}

// bindPolicy is the compose loader's bind check for verb: the approved
// binds of the state directory's config.toml ([binds]); for a remote engine
// (deploy and validate through a remote context) every bind is refused,
// because its approved binds are in the config.toml of the state directory
// on that engine's machine, which this machine cannot read (and a bind path
// means a path there, not here). convert always resolves against the local
// state directory: it writes a file, for any engine.
func (e *cliEnv) bindPolicy(verb string) composeapi.BindPolicy {
	if verb != "convert" && e.targetsRemote() {
		return composeapi.BindPolicy{Refusal: fmt.Sprintf("%s is a remote engine: its approved binds are under [binds] in config.toml of its state directory on that machine, which cannot be checked from here; "+
			"name the bind in a TOML manifest as the operator approved it there ([[services.NAME.bind]] name = \"...\", path = \"...\", see docs/manifest.md) and deploy that manifest", e.target)}
	}
	return composeapi.BindPolicy{StateDir: e.opts.stateDir}
}

// targetsRemote reports whether the verb acts on a remote engine (never in
// a runner: there the engine is local). It resolves the target when
// routeEngine has not (a local-only verb).
func (e *cliEnv) targetsRemote() bool {
	if remote.Current() != nil {
		return false
	}
	if e.target.Host == "" {
		e.target = resolveTarget(e.dockerCli)
	}
	return e.target.Remote
}

// storeSecretValues stores values in app's secret store under the app lock
// (writeSecretValues).
func storeSecretValues(ctx context.Context, env *cliEnv, app string, values []remote.SecretValue) error {
	if len(values) == 0 {
		return nil
	}
	return withSecretsLock(ctx, env, app, func(st core.Store) error {
		return writeSecretValues(ctx, env, st, app, values)
	})
}

// writeSecretValues writes values into st, the app's store, whose app lock
// the caller holds (a compose project's secrets: read here, or sent by the
// CLI to a runner). Values are never printed; only names and sizes.
func writeSecretValues(ctx context.Context, env *cliEnv, st core.Store, app string, values []remote.SecretValue) error {
	for _, s := range values {
		if err := st.SetSecret(ctx, app, s.Service, s.Name, s.Value); err != nil {
			return err
		}
		fmt.Fprintf(env.dockerCli.Err(), "app %s: secret %s of %s stored from compose (%d bytes)\n", app, s.Name, s.Service, len(s.Value))
	}
	return nil
}

type convertOptions struct {
	in     inputOptions
	output string
}

func newConvertCommand(env *cliEnv) *cobra.Command {
	var o convertOptions
	cmd := &cobra.Command{
		Use:   "convert -f compose.yaml [-f override.yaml] [-o app.toml]",
		Short: "Print the app manifest (TOML) equivalent to a compose project",
		Long: `Convert a compose project into the equivalent app manifest.

The manifest deploys to the same containers as deploy -f compose.yaml. Keys
docker gordon cannot honour are refused with the file and line, and nothing
is printed. Secrets with a file: source are stored by deploy -f compose.yaml;
after convert, store them with docker gordon secrets set. Notes go to stderr.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := loadInput(cmd.Context(), env, "convert", o.in, "")
			if err != nil {
				return err
			}
			if in.compose == nil {
				return fmt.Errorf("convert: %s is already an app manifest (TOML), not a compose file", o.in.files[0])
			}
			if o.output == "" || o.output == "-" {
				_, err = env.dockerCli.Out().Write(in.compose.Manifest)
				return err
			}
			if err := os.WriteFile(o.output, in.compose.Manifest, 0o644); err != nil {
				return fmt.Errorf("convert: %w", err)
			}
			fmt.Fprintf(env.dockerCli.Err(), "wrote %s (app %s, %d service(s))\n", o.output, in.spec.Name, len(in.spec.Services))
			return nil
		},
	}
	addInputFlags(cmd.Flags(), &o.in, "compose project")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the manifest to this file instead of stdout")
	return cmd
}

// printImageRefusal prints an image-check refusal; for a compose project it
// adds the compose lines that map each unmapped image VOLUME.
func printImageRefusal(env *cliEnv, in *appInput, err error) {
	fmt.Fprintln(env.dockerCli.Err(), err)
	if in != nil && in.compose != nil {
		fmt.Fprint(env.dockerCli.Err(), composeVolumeHint(err))
	}
}

// composeVolumeHint returns, for every *engine.ImageVolumeError in err
// (joined errors included), the compose lines that map its paths to named
// volumes; "" when there is none.
func composeVolumeHint(err error) string {
	var b strings.Builder
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
			return
		}
		var ive *engine.ImageVolumeError
		if !errors.As(e, &ive) {
			return
		}
		var svcLines, topLines strings.Builder
		for _, p := range ive.Paths {
			name := strings.Trim(filepath.Base(p), "-._/")
			if name == "" {
				name = "data"
			}
			name = ive.Service + "-" + name
			fmt.Fprintf(&svcLines, "      - %s:%s\n", name, p)
			fmt.Fprintf(&topLines, "  %s:\n", name)
		}
		fmt.Fprintf(&b, "\nIn the compose file, map it to a named volume:\n\nservices:\n  %s:\n    volumes:\n%svolumes:\n%s", ive.Service, svcLines.String(), topLines.String())
	}
	walk(err)
	return b.String()
}
