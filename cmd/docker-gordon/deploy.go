package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/cmd/internal/usererr"
	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/imagebuild"
	"github.com/gordon-deploy/docker-gordon/system/remote"
)

type deployOptions struct {
	in       inputOptions
	services []string
	dryRun   bool
	pull     string
	opKey    string
	format   string
	// copyImages is consumed before a remote run (remote.go, copyimages.go).
	copyImages bool
	// build, noBuild: deploy --build, --no-build (build.go); consumed
	// before a remote run.
	build, noBuild bool
	// quiet drops the progress lines (builds and deploy steps).
	quiet bool
}

// buildMode returns the build mode the flags select.
func (o deployOptions) buildMode() imagebuild.Mode {
	switch {
	case o.dryRun:
		return imagebuild.Plan
	case o.build:
		return imagebuild.Always
	case o.noBuild:
		return imagebuild.Never
	}
	return imagebuild.Missing
}

func newDeployCommand(env *cliEnv) *cobra.Command {
	var o deployOptions
	cmd := &cobra.Command{
		Use:   "deploy (-f FILE | APP)",
		Short: "Deploy an app: store the manifest as a new revision, then replace its services without downtime",
		Long: `Deploy an app.

  deploy -f FILE   validate FILE, store it as the app's new revision, deploy it
  deploy APP       deploy the app's latest stored revision

Stateless services are replaced with an overlap: the new container starts,
passes readiness, traffic switches to it, and only then is the old one
drained and stopped with its own stop grace. Services with a volume, bind,
device or UDP interface are replaced sequentially.

A service with a build (compose build:, [services.X.build]) is built first on
the engine that runs the app and tagged gordon/<app>-<service>:<hash>; an
unchanged context and settings build and deploy nothing new. A failed build
changes nothing.

Hooks ([services.X.hooks]) run with docker exec, once per deploy, in the
first instance: before_switch in the ready new container before traffic
switches to it (a failure removes it, the old one keeps serving, exit 1);
after_switch in the new container after the switch (a failure is reported,
exit 2). Each runs with GORDON_APP, GORDON_SERVICE, GORDON_REVISION and
GORDON_PREVIOUS_REVISION, within its timeout (default 5m); its output is
shown here and ` + "`docker gordon ops APP OP`" + ` shows its exit status and duration.

A service with [services.X.monitor] (window, max_error_rate, min_requests)
is watched after the switch: the old generation is stopped, not removed,
and progress counts the window down. When the new generation's share of
5xx answers at the edge exceeds max_error_rate with at least min_requests
requests, or after_switch fails, the old generation is started, probed and
routed again, the new one is removed, and the deploy fails naming the
measured rate (an automatic rollback, journaled on service.X.monitor, and
sent to the [notify] webhook as an event "rollback" document). A service
replaced sequentially (volume, bind, device, UDP) never runs two
generations: the new one is stopped and removed before the old one starts
again, while the edge holds its requests. A rollback restores the code,
never the data.

Exit status: 0 success, 2 partial, 1 failed.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDeploy(cmd, env, o, args)
		},
	}
	f := cmd.Flags()
	addInputFlags(f, &o.in, "stored as a new revision")
	f.StringArrayVar(&o.services, "service", nil, "deploy only this service (repeatable)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the plan (unchanged, overlap or sequential, and why) and change nothing")
	f.StringVar(&o.pull, "pull", "missing", "image pull policy: always, missing or never")
	f.StringVar(&o.opKey, "op-key", "", "idempotency key: a repeat with the same key returns the stored result")
	f.BoolVar(&o.build, "build", false, "build every service with a build section even when its context and settings are unchanged")
	f.BoolVar(&o.noBuild, "no-build", false, "build nothing: refuse when a service's built image is missing")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress lines on stderr (builds and deploy steps)")
	f.BoolVar(&o.copyImages, "copy-images", false, "remote engine: first send each image the manifest names from this machine's engine (skipped when the engine has it)")
	addFormatFlag(cmd, &o.format)
	return cmd
}

func runDeploy(cmd *cobra.Command, env *cliEnv, o deployOptions, args []string) error {
	if err := checkDeployArgs(cmd, o, args); err != nil {
		return err
	}
	fromFile := len(o.in.files) > 0
	ctx := cmd.Context()
	var spec core.AppSpec
	var in *appInput
	app := ""
	if fromFile {
		var err error
		if in, err = loadInput(ctx, env, "deploy", o.in, ""); err != nil {
			return err
		}
		spec = in.spec
		app = spec.Name
		// A bind the swarm edge does not publish is refused before
		// anything is built, stored or created.
		if err := env.platform().CheckBinds(spec); err != nil {
			return cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("deploy: %v; nothing was changed", err)}
		}
	} else {
		app = args[0]
	}

	if fromFile && !o.dryRun {
		warmProbes(ctx, env, spec)
	}
	eng, err := env.engine(ctx, "deploy")
	if err != nil {
		return err
	}
	req := engine.DeployRequest{App: app, Services: o.services, OpKey: o.opKey, Pull: o.pull, DryRun: o.dryRun}

	if o.dryRun {
		if fromFile {
			if _, err := imagebuild.Resolve(ctx, nil, &in.spec, imagebuild.Plan, nil, nil); err != nil {
				return cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("deploy: %v; nothing was changed", err)}
			}
			spec = in.spec
			req.Spec = &spec
		}
		return printDeployPlan(ctx, env, eng, req, o.format, fromFile)
	}

	if fromFile {
		if req.Submit, err = deploySubmission(ctx, env, eng, o, in); err != nil {
			return err
		}
	}

	pr := newProgressRenderer(env.dockerCli.Err(), env.dockerCli.Err().IsTerminal())
	if !o.quiet {
		eng.Progress = pr.event
	}
	res, derr := eng.Deploy(ctx, req)
	pr.finish()
	if res == nil {
		if !fromFile && errors.Is(derr, core.ErrNotFound) {
			return fmt.Errorf("app %q has no stored revision: deploy a manifest first with docker gordon deploy -f FILE", app)
		}
		return derr
	}
	printCandidateDiagnostics(env, res)
	if isJSON(o.format) {
		var builds []imagebuild.Image
		if in != nil {
			builds = in.builds
		}
		if err := writeDeployJSON(env.dockerCli.Out(), res.Op, builds); err != nil {
			return err
		}
	} else {
		renderDeployResult(env, res)
	}
	return exitForOutcome(res.Outcome, derr)
}

// checkDeployArgs refuses a deploy whose arguments do not say what to
// deploy (neither or both of -f FILE and APP, a file given as APP) or
// whose --pull is not always, missing or never.
func checkDeployArgs(cmd *cobra.Command, o deployOptions, args []string) error {
	fromFile := len(o.in.files) > 0
	switch {
	case !fromFile && len(args) == 0:
		return errors.New("deploy: give -f FILE (a manifest) or APP (deploy its latest revision)")
	case fromFile && len(args) > 0:
		return errors.New("deploy: give either -f FILE or APP, not both")
	case o.build && o.noBuild:
		return errors.New("deploy: give --build (rebuild) or --no-build (never build), not both")
	}
	if hint := fileArgHint(cmd, args); hint != "" {
		return fmt.Errorf("deploy: %q is not an app name%s", args[0], hint)
	}
	switch o.pull {
	case "always", "missing", "never":
	default:
		return fmt.Errorf("deploy: --pull %q: want always, missing or never", o.pull)
	}
	return nil
}

// printDeployPlan is `deploy --dry-run`: the plan as text or JSON; nothing
// is changed.
func printDeployPlan(ctx context.Context, env *cliEnv, eng *engine.Engine, req engine.DeployRequest, format string, fromFile bool) error {
	plan, err := eng.PlanDeploy(ctx, req)
	if err != nil {
		if !fromFile && errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("app %q has no stored revision: deploy a manifest first with docker gordon deploy -f FILE (or plan one with deploy -f FILE --dry-run)", req.App)
		}
		return err
	}
	if isJSON(format) {
		return writeJSON(env.dockerCli.Out(), plan)
	}
	fmt.Fprint(env.dockerCli.Out(), plan.String())
	return nil
}

// deploySubmission runs the builds of in's services (checks too, SPEC R12:
// a failed one changes nothing) and returns what the deploy checks and
// stores under its app lock (engine.Submission: one lock, each
// check once): after the engine's live-edge check (R68), an image VOLUME
// the manifest does not map is refused (exit 1, "nothing was changed"),
// then a compose project's secrets (or those a remote CLI sent) are stored,
// since CheckDeployable requires them set; a refused manifest is never
// stored.
func deploySubmission(ctx context.Context, env *cliEnv, eng *engine.Engine, o deployOptions, in *appInput) (*engine.Submission, error) {
	if imagebuild.HasBuilds(in.spec) {
		// A stopped edge refuses before a build that may take minutes
		// (the deploy asks again under its lock).
		if err := eng.RequireLiveTraffic(ctx, "deploy"); err != nil {
			return nil, err
		}
	}
	if _, err := deployBuilds(ctx, env, o, in); err != nil {
		return nil, err
	}
	spec, app := in.spec, in.spec.Name
	return &engine.Submission{
		Spec:         spec,
		SourceSHA256: in.sha,
		Prepare: func(ctx context.Context) error {
			if err := eng.CheckImages(ctx, spec); err != nil {
				printImageRefusal(env, in, err)
				return cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("deploy: %s refused; nothing was changed", o.in.files[0])}
			}
			// Under the deploy's app lock: written to its own store.
			switch {
			case in.compose != nil:
				values, err := remote.SecretValues(in.compose.Secrets)
				if err != nil {
					return err
				}
				return writeSecretValues(ctx, env, eng.Store, app, values)
			case remote.Current() != nil:
				// A remote deploy of a compose project: the CLI sent the
				// converted manifest and its secrets' values.
				return writeSecretValues(ctx, env, eng.Store, app, remote.Current().Secrets)
			}
			return nil
		},
		Stored: func(rev core.Revision) {
			fmt.Fprintf(env.dockerCli.Err(), "app %s: stored revision %s\n", app, rev.ID)
		},
	}, nil
}

// printCandidateDiagnostics writes, on stderr, the last log lines of each
// candidate that failed.
func printCandidateDiagnostics(env *cliEnv, res *engine.DeployResult) {
	for _, s := range res.Services {
		if len(s.Diagnostics) > 0 {
			fmt.Fprintf(env.dockerCli.Err(), "--- %s: last %d log lines of candidate %s ---\n", s.Service, len(s.Diagnostics), shortID(s.After))
			for _, l := range s.Diagnostics {
				fmt.Fprintln(env.dockerCli.Err(), l)
			}
			fmt.Fprintln(env.dockerCli.Err(), "---")
		}
	}
}

func renderDeployResult(env *cliEnv, res *engine.DeployResult) {
	w := env.dockerCli.Out()
	if len(res.Services) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "SERVICE\tRESULT\tFLOW\tCONTAINER\tPORTS")
		for _, s := range res.Services {
			flow := s.Flow
			if flow == engine.FlowSequential && s.Before == "" {
				// A first deployment runs the sequential flow (SPEC
				// R19) with nothing to replace.
				flow = "new"
			}
			ctr := shortID(s.After)
			if n := len(s.Instances); n > 1 {
				ctr = fmt.Sprintf("%s +%d", ctr, n-1) // the other instances: status APP lists them
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Service, s.Result, flow, ctr, formatBinds(s.IP, s.BackendBinds, s.UDPBackendBinds))
		}
		tw.Flush()
	}
	for _, wa := range res.Warnings {
		fmt.Fprintln(env.dockerCli.Err(), usererr.WarningLine(wa))
	}
	fmt.Fprintf(w, "op %s: %s\n", res.Op.ID, res.Outcome)
}

// exitForOutcome maps an outcome to the exit status (SPEC decision 5):
// 0 success, 2 partial, 1 failed.
func exitForOutcome(outcome core.Outcome, err error) error {
	switch outcome {
	case core.OutcomeSuccess:
		return nil
	case core.OutcomePartial:
		msg := "partial: some services failed"
		if err != nil {
			msg = err.Error()
		}
		return cli.StatusError{StatusCode: 2, Status: msg}
	default:
		if err == nil {
			err = errors.New("failed")
		}
		return cli.StatusError{StatusCode: 1, Status: err.Error()}
	}
}

// formatBinds renders binds as "<port>/<proto>-><IP or 127.0.0.1>:<port>",
// comma-separated, "-" for none.
func formatBinds(ip string, tcp, udp map[int]int) string {
	if ip == "" {
		ip = "127.0.0.1"
	}
	var parts []string
	for _, m := range []struct {
		proto string
		b     map[int]int
	}{{"tcp", tcp}, {"udp", udp}} {
		ports := make([]int, 0, len(m.b))
		for p := range m.b {
			ports = append(ports, p)
		}
		sort.Ints(ports)
		for _, p := range ports {
			parts = append(parts, fmt.Sprintf("%d/%s->%s", p, m.proto, net.JoinHostPort(ip, strconv.Itoa(m.b[p]))))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// deployBuilds runs the builds of in's services on the engine (build.go);
// the op's steps (--format json) carry each built image's ID as its
// digest. A failed build is a refusal (exit 1) that says nothing was
// changed.
func deployBuilds(ctx context.Context, env *cliEnv, o deployOptions, in *appInput) ([]imagebuild.Image, error) {
	if !imagebuild.HasBuilds(in.spec) {
		return nil, nil
	}
	var progress io.Writer = env.dockerCli.Err()
	if o.quiet {
		progress = nil
	}
	bd := &imagebuild.Builder{Mode: o.buildMode(), Progress: progress, Errw: env.dockerCli.Err()}
	if bd.Mode != imagebuild.Plan { // a dry run talks to no engine
		bd.API = env.dockerCli.Client()
		bd.Auths, bd.PushAuth = imagebuild.ClientAuths(env.dockerCli.ConfigFile(), env.logger)
	}
	built, err := bd.Resolve(ctx, &in.spec)
	if err != nil {
		return nil, cli.StatusError{StatusCode: 1, Status: fmt.Sprintf("deploy: %v; nothing was changed", err)}
	}
	in.builds = built
	return built, nil
}

// writeDeployJSON writes the op as `ops APP OP --format json` shows it
// (engine.OpView: verb set, phases in phases_ms); with builds, the object
// has one more key, "builds": [{service, tag, id (the image ID), built}].
func writeDeployJSON(w io.Writer, op core.Operation, builds []imagebuild.Image) error {
	view := engine.OpViewOf(op)
	if len(builds) == 0 {
		return writeJSON(w, view)
	}
	data, err := json.Marshal(view)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	m["builds"] = builds
	return writeJSON(w, m)
}
