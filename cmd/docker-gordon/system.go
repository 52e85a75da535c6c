package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// reconcileOpts are the flags of `system start` for the reconcile loop.
type reconcileUnitOpts struct {
	interval time.Duration
	boot     bool // pass --boot (when the reconcile verb has that flag)
}

// reconcileUnit is the gordon-reconcile system container: this binary run
// directly (not through the docker CLI) as `docker-gordon gordon reconcile
// --watch [--boot]`, talking to the engine through the bind-mounted socket.
// dockerHost is the engine endpoint the CLI uses (DOCKER_HOST form); a unix
// socket is mounted at /var/run/docker.sock, a tcp:// endpoint is used as is
// (host network); anything else (ssh://, TLS) is core.ErrInvalid.
func reconcileUnit(stateDir, dockerHost string, o reconcileUnitOpts) (docker.Unit, error) {
	self, err := os.Executable()
	if err != nil {
		return docker.Unit{}, fmt.Errorf("find own executable: %w", err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return docker.Unit{}, fmt.Errorf("own executable: %w", err)
	}
	env := []string{
		"GORDON_STATE_DIR=" + stateDir,
		"TMPDIR=/tmp",
		"HOME=/tmp",
		"DOCKER_CONFIG=/tmp/.docker",
	}
	binds := []string{stateDir + ":" + stateDir}
	var groups []string
	switch {
	case dockerHost == "" || strings.HasPrefix(dockerHost, "unix://"):
		sock := strings.TrimPrefix(dockerHost, "unix://")
		if sock == "" {
			sock = "/var/run/docker.sock"
		}
		fi, err := os.Stat(sock)
		if err != nil {
			return docker.Unit{}, fmt.Errorf("docker socket %s: %w: %w", sock, core.ErrUnavailable, err)
		}
		binds = append(binds, sock+":"+docker.DockerSock)
		env = append(env, "DOCKER_HOST=unix://"+docker.DockerSock)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() != 0 {
			groups = append(groups, fmt.Sprint(st.Gid))
		}
	case strings.HasPrefix(dockerHost, "tcp://") && os.Getenv("DOCKER_TLS_VERIFY") == "":
		env = append(env, "DOCKER_HOST="+dockerHost)
	default:
		return docker.Unit{}, fmt.Errorf("engine endpoint %s: the reconcile container supports a local unix socket or plain tcp:// only: %w", dockerHost, core.ErrInvalid)
	}
	cmd := []string{"gordon", "reconcile", "--watch"}
	if o.interval > 0 {
		cmd = append(cmd, "--interval", o.interval.String())
	}
	if o.boot {
		cmd = append(cmd, "--boot")
	}
	return docker.Unit{
		Kind:       "reconcile",
		Name:       docker.ReconcileName,
		Binaries:   map[string]string{"/docker-gordon": self},
		Entrypoint: []string{"/docker-gordon"},
		Cmd:        cmd,
		Env:        env,
		Binds:      binds,
		User:       containerUser(),
		GroupAdd:   groups,
		StateDir:   stateDir,
		StopGrace:  30 * time.Second,
	}, nil
}

// reconcileHasBoot reports whether this build's reconcile verb has --boot:
// the reconcile command beside cmd or beside one of its ancestors (as a
// CLI plugin the root is "docker" and the verbs hang below "gordon", so a
// lookup from the root alone never finds it).
func reconcileHasBoot(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		for _, sub := range c.Commands() {
			if sub.Name() == "reconcile" {
				return sub.Flags().Lookup("boot") != nil
			}
		}
	}
	return false
}

// newSystemCommand is `docker gordon system start|stop|status|logs`: the
// edge and the reconcile loop as Docker-managed system containers
// (ARCHITECTURE §1).
func newSystemCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "system",
		Short: "Run the edge and the reconcile loop as Docker-managed system containers",
		Long: `The system containers gordon-edge (gordon-edge run) and gordon-reconcile
(reconcile --watch --boot) are built locally FROM scratch from the installed
binaries, run on the host network with restart policy unless-stopped and the
state directory bind-mounted at the same path, so they come back with the
engine after a reboot; no registry and no systemd are needed.`,
	}

	start := newSystemStartCommand(env)

	keepEdge := false
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop and remove gordon-reconcile and gordon-edge",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env.platform().OnSwarm() {
				return stopSwarmSystem(cmd.Context(), env, keepEdge)
			}
			if keepEdge {
				return fmt.Errorf("--keep-edge: only on a swarm (to hand the edge to another manager's state directory); nothing was changed: %w", core.ErrInvalid)
			}
			if err := runStopSystem(cmd.Context(), env, docker.ReconcileName, 30*time.Second); err != nil {
				return err
			}
			return runStopSystem(cmd.Context(), env, docker.EdgeName, 35*time.Second)
		},
	}

	stop.Flags().BoolVar(&keepEdge, "keep-edge", false, "on a swarm: stop only this state directory's reconcile loop and leave the edge service serving (to hand the swarm to another manager: system start --adopt there)")

	status := newSystemStatusCommand(env)

	logs := newSystemLogsCommand(env, "logs edge|reconcile", "Show the logs of a system container",
		func(arg string) (string, error) {
			switch arg {
			case "edge", docker.EdgeName:
				return docker.EdgeName, nil
			case "reconcile", docker.ReconcileName:
				return docker.ReconcileName, nil
			}
			return "", fmt.Errorf("system container %q: want edge or reconcile: %w", arg, core.ErrInvalid)
		}, cobra.ExactArgs(1))

	cmd.AddCommand(start, stop, status, logs)
	return cmd
}

// newSystemStartCommand is `system start`: build and run gordon-edge and
// gordon-reconcile (idempotent), then say where the edge listens.
func newSystemStartCommand(env *cliEnv) *cobra.Command {
	var edgeFlags edgeContainerFlags
	var interval time.Duration
	var swarmOpts swarmStartOpts
	start := &cobra.Command{
		Use:   "start",
		Short: "Start (or update) gordon-edge and gordon-reconcile; idempotent",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			remembered := edgeFlags.resolve(cmd, env.opts.stateDir)
			nodeID, onSwarm, err := chooseSwarm(cmd.Context(), env.dockerCli.Client(), swarmOpts)
			if err != nil {
				return err
			}
			if onSwarm {
				return startSwarmSystem(cmd, env, nodeID, swarmOpts, edgeFlags, interval)
			}
			if env.platform().OnSwarm() {
				return fmt.Errorf("this state directory serves a swarm (%s): system start --runtime docker on it would strand its apps' services; use another --state-dir for a one-engine edge: %w",
					filepath.Join(env.opts.stateDir, swarm.ConfigFile), core.ErrConflict)
			}
			eu, err := edgeUnit(env.opts.stateDir, edgeFlags.httpAddr, edgeFlags.adminAddr, edgeFlags.drain)
			if err != nil {
				return err
			}
			if err := withEdgeTLS(&eu, &edgeFlags.tls, env.opts.stateDir); err != nil {
				return err
			}
			if err := withEdgeAccessLog(&eu, &edgeFlags.access, env.opts.stateDir); err != nil {
				return err
			}
			ru, err := reconcileUnit(env.opts.stateDir, env.dockerCli.DockerEndpoint().Host, reconcileUnitOpts{
				interval: interval,
				boot:     reconcileHasBoot(cmd),
			})
			if err != nil {
				return err
			}
			if err := ensureStateDir(env.opts.stateDir); err != nil {
				return err
			}
			api := env.dockerCli.Client()
			for _, u := range []docker.Unit{eu, ru} {
				r, err := docker.Ensure(cmd.Context(), api, u)
				if err != nil {
					return err
				}
				printStart(env.dockerCli.Out(), u.Name, r)
			}
			edgeFlags.remember(env.opts.stateDir)
			printEdgeAddr(env.dockerCli.Out(), edgeFlags, remembered)
			return nil
		},
	}
	edgeFlags.register(start)
	swarmOpts.register(start)
	start.Flags().DurationVar(&interval, "interval", engine.DefaultReconcileInterval, "time between reconcile passes")

	return start
}

// newSystemStatusCommand is `system status [--format json]`: both system
// containers and the edge's applied generation (or why it is unknown).
func newSystemStatusCommand(env *cliEnv) *cobra.Command {
	var format string
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the system containers (state, image, start time) and the edge's applied generation",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env.platform().OnSwarm() {
				return swarmSystemStatus(cmd.Context(), env, format)
			}
			api := env.dockerCli.Client()
			var view systemStatusView
			for _, name := range []string{docker.EdgeName, docker.ReconcileName} {
				st, err := docker.Inspect(cmd.Context(), api, name)
				if err != nil {
					return err
				}
				view.Containers = append(view.Containers, st)
			}
			if es, err := edgeTrafficStatus(cmd.Context(), env); err == nil {
				g := es.AppliedGeneration
				view.EdgeAppliedGeneration = &g
				view.EdgeError = es.Error
			} else {
				view.EdgeError = err.Error()
			}
			if isJSON(format) {
				return writeJSON(env.dockerCli.Out(), view)
			}
			w := env.dockerCli.Out()
			if err := renderSystemStatus(w, view.Containers...); err != nil {
				return err
			}
			if view.EdgeAppliedGeneration != nil {
				fmt.Fprintf(w, "edge applied generation: %d\n", *view.EdgeAppliedGeneration)
			}
			if view.EdgeError != "" {
				fmt.Fprintf(w, "edge: %s\n", view.EdgeError)
			}
			return nil
		},
	}
	addFormatFlag(status, &format)

	return status
}

// systemStatusView is `system status --format json`.
type systemStatusView struct {
	Containers            []docker.Status `json:"containers"`
	EdgeAppliedGeneration *uint64         `json:"edge_applied_generation,omitempty"`
	EdgeError             string          `json:"edge_error,omitempty"`
}
