package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/privilege"
	"github.com/gordon-deploy/docker-gordon/core/readycheck"
	"github.com/gordon-deploy/docker-gordon/imagebuild"
	"github.com/gordon-deploy/docker-gordon/system"
)

func newValidateCommand(env *cliEnv) *cobra.Command {
	var in inputOptions
	var format string
	cmd := &cobra.Command{
		Use:   "validate -f FILE [-f FILE...]",
		Short: "Check a manifest or a compose project and report every problem at once",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := loadInput(cmd.Context(), env, "validate", in, format)
			if err != nil {
				return err
			}
			// A built service is checked under its build's tag (its
			// context must be readable); nothing is built.
			built, err := imagebuild.Resolve(cmd.Context(), nil, &res.spec, imagebuild.Plan, nil, nil)
			if err != nil {
				return cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("validate: %v", err)}
			}
			imageHC, ierr := checkLocalImages(cmd.Context(), env, res.spec, built)
			if ierr != nil {
				printImageRefusal(env, res, ierr)
				return cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("%s: refused by its images", in.files[0])}
			}
			if perr := checkPrivilegesHere(env, res.spec); perr != nil {
				return cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("validate: %s: %v", in.files[0], perr)}
			}
			if serr := checkSwarmBindsHere(env, res.spec); serr != nil {
				return cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("validate: %s: %v", in.files[0], serr)}
			}
			if rerr := checkRoutesHere(cmd.Context(), env, res.spec); rerr != nil {
				return cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("validate: %s: %v; nothing was changed", in.files[0], rerr)}
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), res.spec)
			}
			kind := ""
			if res.compose != nil {
				kind = "compose project, "
			}
			fmt.Fprintf(env.dockerCli.Out(), "%s: ok (%sapp %s, %d service(s))\n", in.files[0], kind, res.spec.Name, len(res.spec.Services))
			printReadiness(env.dockerCli.Out(), res.spec, imageHC)
			return nil
		},
	}
	addInputFlags(cmd.Flags(), &in, "to check")
	addFormatFlag(cmd, &format)
	return cmd
}

// checkLocalImages runs the engine's image checks (an unmapped image
// VOLUME, readiness "docker" without a healthcheck) for the images that
// are present on the engine, and returns, by service, whether its image
// has a HEALTHCHECK (absent: unknown). A service of built is built by the
// deploy: its image is not said to be pulled. When the runtime backend
// cannot be reached the checks are skipped with a note on stderr:
// validate needs no engine.
func checkLocalImages(ctx context.Context, env *cliEnv, spec core.AppSpec, built []imagebuild.Image) (map[string]bool, error) {
	host, err := env.pluginHost()
	if err == nil {
		var rt core.Runtime
		if rt, err = host.Runtime(ctx, env.platform().RuntimeName()); err == nil {
			if _, err = rt.Info(ctx); err == nil {
				eng := &engine.Engine{Runtime: rt}
				if err := eng.CheckImages(ctx, spec); err != nil {
					return nil, err
				}
				imageHC := map[string]bool{}
				for _, s := range spec.Services {
					if img, err := rt.ResolveImage(ctx, s.Image); err == nil {
						imageHC[s.Name] = img.HasHealthcheck
					}
				}
				// A missing image is no refusal (the deploy pulls it), but
				// a deploy fails on it when it cannot be pulled: say so.
				missing, err := eng.MissingImages(ctx, spec)
				for _, m := range missing {
					service, image, _ := strings.Cut(m, ": ")
					if slices.ContainsFunc(built, func(b imagebuild.Image) bool { return b.Service == service }) {
						fmt.Fprintf(env.dockerCli.Err(), "note: service %s: image %s is built on deploy (from its build context)\n", service, image)
						continue
					}
					fmt.Fprintf(env.dockerCli.Err(), "note: service %s: image %s is not on the engine: deploy pulls it first and fails if it cannot (build or load it there, or deploy --copy-images from another machine)\n", service, image)
				}
				return imageHC, err
			}
		}
	}
	fmt.Fprintf(env.dockerCli.Err(), "note: image checks skipped (no engine: %v)\n", err)
	return nil, nil
}

// printReadiness prints, per service, the check a new container passes
// before it is routed and where it comes from (R29): "  web: readiness
// tcp connect :8080 (default)". A service whose image is unknown here
// (absent from imageHC) is shown without an image HEALTHCHECK, noted.
func printReadiness(w io.Writer, spec core.AppSpec, imageHC map[string]bool) {
	for i := range spec.Services {
		s := &spec.Services[i]
		if s.Run == core.RunOnce {
			continue
		}
		hc, known := imageHC[s.Name]
		r := readycheck.Deploy(s, hc)
		note := ""
		if !known && r.Source == readycheck.FromDefault {
			note = "; an image HEALTHCHECK, unknown here, would be used instead"
		}
		fmt.Fprintf(w, "  %s: readiness %s%s\n", s.Name, r, note)
	}
}

// checkSwarmBindsHere refuses, as deploy would, a bind the swarm edge of
// this machine's state directory does not publish (a remote engine's
// swarm.json is on its machine: skipped).
func checkSwarmBindsHere(env *cliEnv, spec core.AppSpec) error {
	if env.targetsRemote() {
		return nil
	}
	return env.platform().CheckBinds(spec)
}

// checkPrivilegesHere refuses, as deploy would, the options beyond
// Docker's defaults that [privileges.<app>] of this machine's config.toml
// does not approve (checkPrivileges). A remote engine's config.toml is on
// its machine: skipped with a note, its deploy checks them there.
func checkPrivilegesHere(env *cliEnv, spec core.AppSpec) error {
	if env.targetsRemote() {
		for i := range spec.Services {
			if caps, devices := (privilege.Privileges{}).Unapproved(&spec.Services[i]); len(caps)+len(devices) > 0 {
				fmt.Fprintf(env.dockerCli.Err(), "note: privilege checks skipped (the remote engine's config.toml is on its machine; deploy checks them there)\n")
				break
			}
		}
		return nil
	}
	return system.CheckPrivileges(env.opts.stateDir, spec)
}

// checkRoutesHere refuses a host or publish address of spec that another
// app of this state directory routes (engine.CheckRoutesFree), as deploy
// would. It needs the state directory the deploy would use: none here (a
// remote engine's is on its machine, or none exists yet) skips it.
func checkRoutesHere(ctx context.Context, env *cliEnv, spec core.AppSpec) error {
	if env.targetsRemote() {
		return nil
	}
	if _, err := os.Stat(filepath.Join(env.opts.stateDir, "VERSION")); err != nil {
		return nil // no journal there yet: nothing routed, and nothing is created
	}
	store, err := env.openStore()
	if err != nil {
		fmt.Fprintf(env.dockerCli.Err(), "note: route checks skipped (state directory: %v)\n", err)
		return nil
	}
	return (&engine.Engine{Store: store}).CheckRoutesFree(ctx, spec)
}
