package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli-plugins/plugin"
	"github.com/docker/cli/cli/command"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/cmd/internal/helptext"
	"github.com/gordon-deploy/docker-gordon/cmd/internal/usererr"
	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
	"github.com/gordon-deploy/docker-gordon/internal/faultstore"
	"github.com/gordon-deploy/docker-gordon/journal"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/remote"
)

// globalOptions are the flags every verb shares.
type globalOptions struct {
	stateDir    string
	pluginDirs  []string
	debug       bool
	lockTimeout time.Duration
}

// cliEnv is what a verb needs: options, the docker CLI, and lazily opened
// store, plugin host and engine. close() kills every plugin subprocess.
type cliEnv struct {
	opts      globalOptions
	dockerCli command.Cli
	logger    hclog.Logger

	store *journal.Store
	host  *sdk.Host
	eng   *engine.Engine

	// target is the engine the verb acts on (remote.go).
	target remote.Target

	// plat is the state directory's platform (one engine or a swarm),
	// resolved once (platform; nil: not yet). A verb's own goroutine
	// reads it.
	plat *system.Platform
	// ownerInPasses: the watcher checks the swarm owner before each pass
	// (R80) instead of refusing to start.
	ownerInPasses bool
	// quiet is --quiet of a verb with progress that has no options
	// struct of its own for it (scale, rollback).
	quiet bool
}

func newRootCommand(dockerCli command.Cli) *cobra.Command {
	env := &cliEnv{dockerCli: dockerCli}
	// PersistentPostRun runs only after success; the finalizer runs on every
	// exit path of Execute (an error too), so plugin processes and their
	// socket directory never outlive the command.
	cobra.OnFinalize(env.close)
	cmd := &cobra.Command{
		Use:           "gordon",
		Short:         "Zero-downtime deploys of multi-service apps on one Docker engine",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := plugin.PersistentPreRunE(cmd, args); err != nil {
				return err
			}
			if err := env.setup(cmd); err != nil {
				return err
			}
			return env.routeEngine(cmd)
		},
		PersistentPostRun: func(*cobra.Command, []string) { env.close() },
		// Without a verb: help. With an unknown one: an error (exit 1),
		// not the help text and success.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("docker gordon: unknown command %q; see docker gordon --help", args[0])
			}
			return cmd.Help()
		},
	}
	f := cmd.PersistentFlags()
	f.StringVar(&env.opts.stateDir, "state-dir", "", "state directory (env GORDON_STATE_DIR; default /var/lib/docker-gordon for root, else $XDG_STATE_HOME/docker-gordon)")
	f.StringArrayVar(&env.opts.pluginDirs, "plugin-dir", nil, "extra directory searched for gordon-<kind>-<name> plugins (repeatable; also GORDON_PLUGIN_PATH)")
	f.BoolVar(&env.opts.debug, "debug", false, "log engine and plugin diagnostics (plugin stderr) to stderr")
	f.DurationVar(&env.opts.lockTimeout, "lock-timeout", 60*time.Second, "how long a verb waits for another verb on the same app before failing (names the holder)")

	cmd.AddCommand(
		newVersionCommand(env),
		newPluginsCommand(env),
		newValidateCommand(env),
		newConvertCommand(env),
		newDeployCommand(env),
		newStatusCommand(env),
		newOpsCommand(env),
		newRevisionsCommand(env),
		newExecCommand(env),
		newEdgeCommand(env),
		newReconcileCommand(env),
		newSystemCommand(env),
		newStopCommand(env),
		newSleepCommand(env),
		newWakeCommand(env),
		newStartCommand(env),
		newRestartCommand(env),
		newRemoveCommand(env),
		newRollbackCommand(env),
		newMaintenanceCommand(env),
		newScaleCommand(env),
		newLogsCommand(env),
		newJobsCommand(env),
		newSecretsCommand(env),
		newCertsCommand(env),
		newSnapshotsCommand(env),
		newPruneCommand(env),
		newDashboardCommand(env),
	)
	interruptedExits(cmd)
	usererr.Plain(cmd)
	helptext.Install(cmd)
	return cmd
}

// setup resolves options and installs signal handling: SIGINT/SIGTERM (or
// the docker CLI's plugin socket) cancel the command's context, and a
// cancelled context kills every plugin subprocess at once.
func (e *cliEnv) setup(cmd *cobra.Command) error {
	if e.opts.stateDir == "" {
		dir, err := journal.DefaultDir()
		if err != nil {
			return fmt.Errorf("state directory: %w (pass --state-dir or set GORDON_STATE_DIR)", err)
		}
		e.opts.stateDir = dir
	}
	if abs, err := filepath.Abs(e.opts.stateDir); err == nil {
		e.opts.stateDir = abs
	}
	level := hclog.Warn
	if e.opts.debug {
		level = hclog.Debug
	}
	e.logger = hclog.New(&hclog.LoggerOptions{Name: "gordon", Level: level, Output: e.dockerCli.Err()})

	// Socket directories of CLIs killed without clean-up (kill -9) go now.
	sdk.SweepStaleSocketDirs()
	cmd.SetContext(e.interruptible(cmd.Context()))
	return nil
}

// interruptible returns a context derived from parent (which the docker
// CLI's plugin socket ends) that the first SIGINT or SIGTERM cancels. The
// plugins stay up: the verb cleans up through them with contexts of its own
// (a candidate being probed is removed) and the plugins end with the
// command (close). A second signal ends the process at once (the default
// action is back); the plugins then die with it (Pdeathsig).
func (e *cliEnv) interruptible(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs)
			fmt.Fprintf(e.dockerCli.Err(), "%s: cleaning up (send it again to quit at once)\n", signalName(s))
			cancel()
		case <-ctx.Done():
			signal.Stop(sigs)
		}
	}()
	return ctx
}

func signalName(s os.Signal) string {
	if s == os.Interrupt {
		return "interrupted"
	}
	return "terminated"
}

// exitInterrupted is the exit status of an interrupted verb (SPEC decision
// 5): a verb that failed after its context was cancelled (Ctrl-C, SIGTERM,
// the docker CLI's socket, a remote runner's end of stdin).
const exitInterrupted = 130

// interruptedExits wraps the RunE of c and of every command under it: an
// error returned once the command's context is done becomes exit status
// 130 with the same message. A verb that finished anyway keeps its result.
func interruptedExits(c *cobra.Command) {
	for _, sub := range c.Commands() {
		interruptedExits(sub)
	}
	run := c.RunE
	if run == nil {
		return
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		err := run(cmd, args)
		if err == nil || cmd.Context().Err() == nil {
			return err
		}
		msg := err.Error()
		var se cli.StatusError
		if errors.As(err, &se) {
			msg = se.Status
		}
		return cli.StatusError{StatusCode: exitInterrupted, Status: msg}
	}
}

// close waits for the verb's webhook deliveries (at most the notification
// budget: they are queued, so a slow webhook never delayed the verb's
// result), kills plugin subprocesses (removing their socket directory) and
// reports apps whose record a rebuild could not read. Idempotent.
func (e *cliEnv) close() {
	if e.eng != nil {
		ctx, cancel := context.WithTimeout(context.Background(), engine.NotifyBudget+time.Second)
		e.eng.WaitNotifications(ctx)
		cancel()
	}
	if e.host != nil {
		e.host.Close()
	}
	if e.eng != nil {
		unreadable := e.eng.UnreadableApps()
		for _, app := range sortedKeys(unreadable) {
			fmt.Fprintf(e.dockerCli.Err(), "warning: app %s: its record could not be read, so its last good routes were kept: %s\n", app, unreadable[app])
		}
		e.eng = nil
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// openStore opens the journal at the state directory.
func (e *cliEnv) openStore() (*journal.Store, error) {
	if e.store != nil {
		return e.store, nil
	}
	s, err := journal.Open(e.opts.stateDir)
	if err != nil {
		return nil, err
	}
	e.store = s
	return s, nil
}

// pluginHost returns the plugin host. Built-ins run gordon-backends when it
// sits beside this binary from the same build (builtinExe), else re-exec
// this binary.
func (e *cliEnv) pluginHost() (*sdk.Host, error) {
	if e.host != nil {
		return e.host, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for built-in plugins: %w", err)
	}
	self, why := builtinExe(self)
	if why != "" {
		e.logger.Debug("built-in plugins served by docker-gordon itself", "reason", why)
	}
	dirs := append([]string{}, e.opts.pluginDirs...)
	if p := os.Getenv("GORDON_PLUGIN_PATH"); p != "" {
		dirs = append(dirs, filepath.SplitList(p)...)
	}
	dirs = append(dirs, filepath.Join(e.opts.stateDir, "plugins"))
	h, err := sdk.NewHost(sdk.HostConfig{
		SelfExe:    self,
		PluginDirs: dirs,
		Env:        e.pluginEnv(),
		Logger:     e.logger.Named("plugin"),
		// Plugins are reached through a private 0700 socket directory;
		// GORDON_PLUGIN_MTLS=1 adds go-plugin's AutoMTLS on top.
		AutoMTLS: os.Getenv("GORDON_PLUGIN_MTLS") == "1",
	})
	if err != nil {
		return nil, err
	}
	e.host = h
	return h, nil
}

// pluginEnv passes the engine the docker CLI is pointed at (DOCKER_HOST,
// --context) and the state directory to the backend plugins.
func (e *cliEnv) pluginEnv() []string {
	env := []string{"GORDON_STATE_DIR=" + e.opts.stateDir}
	env = append(env, e.platform().PluginEnv()...)
	if ep := e.dockerCli.DockerEndpoint(); ep.Host != "" {
		env = append(env, "DOCKER_HOST="+ep.Host)
	}
	for _, k := range []string{"DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_API_VERSION"} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// engine wires the core engine to the journal and the plugin backends.
func (e *cliEnv) engine(ctx context.Context, verb string) (*engine.Engine, error) {
	store, err := e.openStore()
	if err != nil {
		return nil, err
	}
	if err := e.checkSwarmOwner(ctx); err != nil {
		return nil, err
	}
	host, err := e.pluginHost()
	if err != nil {
		return nil, err
	}
	// The runtime and traffic backends start concurrently: each is a
	// process start and handshake (about 40-60 ms each).
	var tr core.Traffic
	var trErr error
	trDone := make(chan struct{})
	go func() {
		defer close(trDone)
		tr, trErr = host.Traffic(ctx, "edge")
	}()
	rt, err := host.Runtime(ctx, e.platform().RuntimeName())
	<-trDone
	if err != nil {
		return nil, err
	}
	if trErr != nil {
		return nil, trErr
	}
	fs := faultstore.Wrap(store)
	opts := e.platform().EngineOptions()
	e.eng = &engine.Engine{
		Store:        fs,
		AfterCreate:  faultstore.AfterCreate(fs),
		Runtime:      rt,
		Traffic:      tr,
		Readiness:    &engine.ReadinessWaiter{Probes: hostProbes{host}},
		Logger:       e.logger.Named("engine"),
		LockTimeout:  e.opts.lockTimeout,
		LockWait:     func(msg string) { fmt.Fprintln(e.dockerCli.Err(), msg) },
		NotifyFailed: func(msg string) { fmt.Fprintln(e.dockerCli.Err(), "warning: "+msg) },
		Holder:       core.LockHolder{PID: os.Getpid(), Verb: verb, Host: hostname()},
		BindPolicy: func(name string) (string, error) {
			return system.BindPath(e.opts.stateDir, name)
		},
		PrivilegePolicy: func(app string, svc *core.ServiceSpec) error {
			return system.PrivilegePolicy(e.opts.stateDir, app, svc)
		},
		Retention:    e.retention(),
		PortCheck:    checkPort,
		RegistryAuth: e.registryAuth,
		TrafficHint:  e.trafficHint(),
		EdgeNetwork:  opts.EdgeNetwork,
		// Swarm replaces a task whose restart policy changes (R59).
		CreateWithRestartPolicy: opts.CreateWithRestartPolicy,
		RegistryOnly:            opts.RegistryOnly,
		Snapshots:               snapshot.Open(e.opts.stateDir),
	}
	return e.eng, nil
}

// retention is the engine's Retention from this state directory's
// config.toml (system.Retention).
func (e *cliEnv) retention() engine.Retention {
	ops, revisions := system.Retention(e.opts.stateDir)
	return engine.Retention{Ops: ops, Revisions: revisions}
}

// trafficHint tells the engine's refusal for a stopped edge which state
// directory it serves and, on a remote engine's machine (a runner), how to
// start it from the user's machine.
func (e *cliEnv) trafficHint() engine.TrafficHint {
	h := engine.TrafficHint{StateDir: e.opts.stateDir}
	if remote.Current() != nil {
		h.Engine = remote.Current().Engine
		h.Start = fmt.Sprintf("Start the edge and the reconcile loop there with `docker --context %s gordon system start`", remote.Current().Context)
	}
	return h
}

// usageArgs wraps a positional-argument rule so that its error names the
// command and shows its usage line ("docker gordon ops: accepts between 1
// and 2 arg(s), received 0" + "usage: docker gordon ops APP [OP] [flags]").
func usageArgs(rule cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := rule(cmd, args); err != nil {
			// 125, as docker itself exits on a usage error.
			return cli.StatusError{StatusCode: 125, Status: fmt.Sprintf("%s: %v%s\nusage: %s", cmd.CommandPath(), err, fileArgHint(cmd, args), cmd.UseLine())}
		}
		return nil
	}
}

// fileArgHint is "; to read FILE, pass it with -f" when one of args is an
// existing manifest or compose file and cmd takes -f ("" otherwise).
func fileArgHint(cmd *cobra.Command, args []string) string {
	if cmd.Flags().Lookup("file") == nil {
		return ""
	}
	for _, a := range args {
		switch strings.ToLower(filepath.Ext(a)) {
		case ".toml", ".yaml", ".yml", ".json":
			if st, err := os.Stat(a); err == nil && !st.IsDir() {
				return fmt.Sprintf("\n%s is a file: pass it with -f (%s -f %s)", a, cmd.CommandPath(), a)
			}
		}
	}
	return ""
}

// hostProbes resolves readiness types to probe plugins: built-in types to
// probe/<type>, custom ones (type "plugin") to gordon-probe-<name>.
type hostProbes struct{ h *sdk.Host }

func (p hostProbes) Prober(ctx context.Context, kind, name string) (core.Prober, error) {
	if kind == core.ReadinessPlugin {
		return p.h.Probe(ctx, name)
	}
	return p.h.Probe(ctx, kind)
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// withTimeout is a helper for bounded read verbs.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
