package main

// Docker Swarm. `system start` on a swarm manager puts
// gordon-edge on the nodes as a global service (system/swarm) and writes
// <state>/swarm.json. From then on this state directory's runtime is
// runtime/swarm, and every engine verb runs in a runner container on the
// manager attached to the edge overlay: the probes reach task IPs there,
// and traffic/edge pushes each route table to every edge task over it.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/image"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// platform is the state directory's platform (one engine or a swarm),
// resolved once per process: every verb asks several times (runtime,
// plugin environment, engine fields, the deploy's published ports).
func (e *cliEnv) platform() system.Platform {
	if e.plat == nil {
		p := system.Resolve(e.opts.stateDir)
		e.plat = &p
	}
	return *e.plat
}

// swarmStartOpts are system start's swarm flags.
type swarmStartOpts struct {
	runtime   string // auto, docker or swarm
	registry  string
	edgeNodes string // all or labelled
	adopt     bool   // adopt apps whose manager is still up
	tcpPorts  string // comma-separated ports the edge publishes for TCP binds
}

func (o *swarmStartOpts) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.runtime, "runtime", "auto", "auto (swarm when the engine is a swarm manager), docker (this engine only) or swarm")
	cmd.Flags().StringVar(&o.registry, "registry", "", "on a swarm: the registry (host[:port][/path]) the edge image is pushed to; every node pulls it from there")
	cmd.Flags().BoolVar(&o.adopt, "adopt", false, "on a swarm: take over the apps whose records another manager's state directory holds even though that manager is up (stop gordon there first)")
	cmd.Flags().StringVar(&o.edgeNodes, "edge-nodes", "all", "on a swarm: run the edge on all nodes, or only on nodes labelled "+swarm.EdgeNodeLabel+"=true (labelled)")
	cmd.Flags().StringVar(&o.tcpPorts, "tcp-ports", "", "on a swarm: the ports (comma-separated) every edge node publishes for the apps' TCP binds; default: the last start's, else none")
}

// chooseSwarm decides whether system start sets up a swarm: --runtime
// swarm (refused when the engine is not a manager), docker (never), auto
// (when the engine is a swarm manager). nodeID is the manager's.
func chooseSwarm(ctx context.Context, api client.APIClient, o swarmStartOpts) (nodeID string, use bool, err error) {
	switch o.runtime {
	case "docker":
		return "", false, nil
	case "auto", "swarm":
	default:
		return "", false, fmt.Errorf("--runtime %q: want auto, docker or swarm: %w", o.runtime, core.ErrInvalid)
	}
	id, manager, err := swarm.Manager(ctx, api)
	if err != nil {
		return "", false, err
	}
	if !manager {
		if o.runtime == "swarm" {
			return "", false, fmt.Errorf("--runtime swarm: this engine is not a swarm manager (docker swarm init, or point --context at a manager); nothing was changed: %w", core.ErrInvalid)
		}
		return "", false, nil
	}
	return id, true, nil
}

// swarmHTTPPort is the host-mode port of --http-addr: the edge publishes
// it on every node's addresses, so only ":PORT" (or "0.0.0.0:PORT") is
// meaningful.
func swarmHTTPPort(addr string) (int, error) { return swarmPort("--http-addr", addr) }

// startSwarmSystem is system start on a swarm manager: the edge overlay,
// the edge image pushed to the registry, the route-push token, the global
// edge service, swarm.json, then gordon-reconcile on the manager on the
// overlay; it waits until an edge task runs.
func startSwarmSystem(cmd *cobra.Command, env *cliEnv, nodeID string, o swarmStartOpts, ef edgeContainerFlags, interval time.Duration) error {
	ctx := cmd.Context()
	out, api, stateDir := env.dockerCli.Out(), env.dockerCli.Client(), env.opts.stateDir
	old, wasSwarm, err := swarm.Load(stateDir)
	if err != nil {
		return err
	}
	adopted := false
	if !wasSwarm {
		// Another state directory drove this swarm's edge: its settings
		// are the remembered ones, so the edge keeps its spec (R80).
		if old, adopted, err = adoptedEdgeSettings(cmd, api, &ef); err != nil {
			return err
		}
	}
	if o.registry == "" && (wasSwarm || adopted) {
		o.registry = old.Registry // as at the last system start
	}
	running, plan, err := swarmStartChecks(ctx, env, api, &o, old, wasSwarm)
	if err != nil {
		return err
	}
	port, err := swarmHTTPPort(ef.httpAddr)
	if err != nil {
		return err
	}
	bin, err := findEdgeBinary()
	if err != nil {
		return fmt.Errorf("%w: %w", core.ErrNotFound, err)
	}
	if err := ensureStateDir(stateDir); err != nil {
		return err
	}
	cfg := swarm.Config{Registry: o.registry, ManagerNode: nodeID, HTTPPort: port, Labelled: o.edgeNodes == "labelled", Drain: ef.drain}
	if wasSwarm || adopted {
		cfg.Network, cfg.Service, cfg.AdminPort, cfg.StateID = old.Network, old.Service, old.AdminPort, old.StateID
	}
	if err := swarmConfigDefaults(&cfg); err != nil {
		return err
	}
	caRoot, err := resolveSwarmEdge(cmd, &cfg, old, ef.tls, o.tcpPorts)
	if err == nil {
		err = refuseUnpublishingBoundPorts(ctx, env, cfg.TCPPorts)
	}
	if err != nil {
		return err
	}
	if err := ensureSwarmNetwork(ctx, out, api, cfg.Network); err != nil {
		return err
	}
	target := strings.TrimSuffix(o.registry, "/") + "/gordon-edge"
	if cfg.Image, err = pushSwarmEdgeImage(ctx, env, api, bin, o.registry, target); err != nil {
		return err
	}
	token, err := swarmEdgeToken(stateDir, running.Token, wasSwarm)
	if err != nil {
		return err
	}
	caID, err := ensureCARoot(ctx, api, cfg, caRoot)
	if err != nil {
		return err
	}
	action, err := swarm.EnsureEdgeService(ctx, api, swarm.EdgeService{Config: cfg, Token: token, Drain: ef.drain, CARootConfigID: caID}, env.registryAuth(target))
	if err != nil {
		return err
	}
	if err := swarm.Save(stateDir, cfg); err != nil {
		return fmt.Errorf("swarm configuration: %w", err)
	}
	printEdgeServiceAction(out, cfg, old, wasSwarm, action)
	if err := plan.adopt(env); err != nil {
		return err
	}
	// No boot pass on a swarm: Swarm keeps the tasks running through a
	// manager's restart, and boot's Start would hold the routes of apps
	// that serve (an adopting manager's first pass, R80).
	ru, err := swarmReconcileUnit(stateDir, env.dockerCli.DockerEndpoint().Host, cfg, interval, false)
	if err != nil {
		return err
	}
	r, err := docker.Ensure(ctx, api, ru)
	if err != nil {
		return err
	}
	printStart(out, ru.Name, r)
	ef.remember(stateDir)
	return awaitSwarmEdge(ctx, env, api, cfg)
}

// swarmStartChecks is what system start on a swarm checks before it
// changes anything: the running edge and its owner (R80), the flags, a
// state directory serving one-engine apps, the apps to adopt, and the
// reconcile container's name.
func swarmStartChecks(ctx context.Context, env *cliEnv, api client.APIClient, o *swarmStartOpts, old swarm.Config, wasSwarm bool) (swarm.RunningEdge, adoption, error) {
	running, err := adoptSwarmEdge(ctx, env, api, o, old, wasSwarm)
	if err != nil {
		return running, adoption{}, err
	}
	if err := checkSwarmStart(*o); err != nil {
		return running, adoption{}, err
	}
	if !wasSwarm {
		if err := refuseOneEngineApps(ctx, env); err != nil {
			return running, adoption{}, err
		}
	}
	plan, err := planAdoption(ctx, env, api, o.adopt)
	if err != nil {
		return running, adoption{}, err
	}
	if err := docker.CheckFree(ctx, api, docker.ReconcileName, env.opts.stateDir); err != nil {
		return running, adoption{}, fmt.Errorf("%w; nothing was changed", err)
	}
	return running, plan, nil
}

// swarmEdgeToken is the route-push token: the running edge's for a state
// directory that takes it over (adopted, R80), else this state
// directory's, made when it has none.
func swarmEdgeToken(stateDir, adopted string, wasSwarm bool) (string, error) {
	if adopted != "" && !wasSwarm {
		if err := swarm.WriteToken(stateDir, adopted); err != nil {
			return "", fmt.Errorf("edge route-push token: %w", err)
		}
	}
	token, err := swarm.EnsureToken(stateDir)
	if err != nil {
		return "", fmt.Errorf("edge route-push token: %w", err)
	}
	return token, nil
}

// ensureSwarmNetwork creates the edge overlay (attachable) when missing.
func ensureSwarmNetwork(ctx context.Context, out io.Writer, api client.APIClient, name string) error {
	if err := swarm.EnsureNetwork(ctx, api, name); err != nil {
		return err
	}
	fmt.Fprintf(out, "network %s: attachable overlay\n", name)
	return nil
}

// swarmConfigDefaults fills a new StateID and the default network,
// service and admin port.
func swarmConfigDefaults(cfg *swarm.Config) error {
	if cfg.StateID == "" {
		id, err := swarm.NewStateID()
		if err != nil {
			return err
		}
		cfg.StateID = id
	}
	if cfg.Network == "" {
		cfg.Network = swarm.DefaultNetwork
	}
	if cfg.Service == "" {
		cfg.Service = swarm.DefaultService
	}
	if cfg.AdminPort == 0 {
		cfg.AdminPort = swarm.DefaultAdminPort
	}
	return nil
}

// pushSwarmEdgeImage builds the edge image from bin and pushes it to the
// registry (target is <registry>/gordon-edge), returning the pinned
// reference every node pulls.
func pushSwarmEdgeImage(ctx context.Context, env *cliEnv, api client.APIClient, bin, registry, target string) (string, error) {
	img, err := image.Build(ctx, api, "edge", map[string]string{"/gordon-edge": bin}, map[string]string{docker.LabelManaged: "true", docker.LabelRole: docker.RoleSystem})
	if err != nil {
		return "", fmt.Errorf("edge image: %w", err)
	}
	ref, err := swarm.PushImage(ctx, api, img.Ref, registry, img.Hash, env.registryAuth(target))
	if err != nil {
		return "", err
	}
	fmt.Fprintf(env.dockerCli.Out(), "edge image: %s\n", ref)
	return ref, nil
}

// refuseOneEngineApps refuses to turn a state directory that serves apps
// on one engine into a swarm's: their instances are containers, which the
// swarm runtime neither finds nor routes. Removed apps do not count.
func refuseOneEngineApps(ctx context.Context, env *cliEnv) error {
	store, err := env.openStore()
	if err != nil {
		return err
	}
	apps, err := store.ListApps(ctx)
	if err != nil {
		return err
	}
	var serving []string
	for _, app := range apps {
		if a, err := store.LoadActive(ctx, app); err == nil && len(a.Services) > 0 {
			serving = append(serving, app)
		}
	}
	if len(serving) == 0 {
		return nil
	}
	return fmt.Errorf("the state directory %s serves one-engine apps (%s), and system start on a swarm manager would make it a swarm's: give the swarm its own state directory (--state-dir or GORDON_STATE_DIR), or keep this one on one engine with --runtime docker; nothing was changed: %w",
		env.opts.stateDir, strings.Join(serving, ", "), core.ErrConflict)
}

// checkSwarmStart refuses what a swarm edge cannot do yet, before
// anything changes.
func checkSwarmStart(o swarmStartOpts) error {
	switch {
	case o.registry == "":
		return fmt.Errorf("on a swarm every node pulls the edge's image from a registry: pass --registry HOST[:PORT] (one the nodes can pull from), or --runtime docker to run the edge on this engine only; nothing was changed: %w", core.ErrInvalid)
	case o.edgeNodes != "all" && o.edgeNodes != "labelled":
		return fmt.Errorf("--edge-nodes %q: want all or labelled: %w", o.edgeNodes, core.ErrInvalid)
	}
	return nil
}

// swarmReconcileUnit is gordon-reconcile on the manager, on the edge
// overlay (it re-routes rescheduled tasks: their new IPs are pushed to
// every edge), polling every interval (default 1 s on a swarm: Swarm has
// no task events). With HTTPS it also serves the edges' shared certificate
// storage on the overlay (swarm.CertStoragePort).
func swarmReconcileUnit(stateDir, dockerHost string, cfg swarm.Config, interval time.Duration, boot bool) (docker.Unit, error) {
	if interval <= 0 || interval > time.Second {
		interval = time.Second
	}
	u, err := reconcileUnit(stateDir, dockerHost, reconcileUnitOpts{interval: interval, boot: boot})
	if err != nil {
		return u, err
	}
	u.Network = cfg.Network
	if cfg.HTTPSPort > 0 {
		u.Cmd = append(u.Cmd, "--cert-storage-addr", ":"+strconv.Itoa(swarm.CertStoragePort))
	}
	u.Env = append(u.Env, system.EnvOnEdgeNetwork+"=1", swarm.EnvEdgeNetwork+"="+cfg.Network)
	return u, nil
}

// awaitSwarmEdge waits (printing progress, at most 2 minutes without any)
// until every edge task runs and Swarm has finished rolling an update of
// the service out, then lists where the edge runs.
func awaitSwarmEdge(ctx context.Context, env *cliEnv, api client.APIClient, cfg swarm.Config) error {
	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for {
		tasks, err := swarm.EdgeTasks(ctx, api, cfg.Service, cfg.Network)
		if err != nil {
			return err
		}
		updating, ustate, err := swarm.EdgeUpdating(ctx, api, cfg.Service)
		if err != nil {
			return err
		}
		running, states := 0, []string{}
		for _, t := range tasks {
			st := t.NodeName + " " + t.State
			if !t.Current {
				st += " (previous spec)"
				updating = true
			}
			states = append(states, st)
			if t.Running() {
				running++
			}
		}
		line := strings.Join(states, ", ")
		if running > 0 && running == len(tasks) && !updating {
			fmt.Fprintf(env.dockerCli.Out(), "%s: running on %d node(s): %s\n", cfg.Service, running, line)
			return nil
		}
		if updating {
			line = "update " + cmp.Or(ustate, "starting") + ": " + line
		}
		if line != last {
			fmt.Fprintf(env.dockerCli.Err(), "waiting for the edge tasks: %s\n", orDash(line))
			last, deadline = line, time.Now().Add(2*time.Minute)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the edge service %s has %d of %d task(s) running, unchanged for 2 minutes (%s): see docker service ps %s: %w",
				cfg.Service, running, len(tasks), orDash(line), cfg.Service, core.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stopSwarmSystem is system stop on a swarm: gordon-reconcile, the edge
// service; swarm.json stays (apps keep their runtime; system start brings
// the edge back).
func stopSwarmSystem(ctx context.Context, env *cliEnv, keepEdge bool) error {
	if err := runStopSystem(ctx, env, docker.ReconcileName, 30*time.Second); err != nil {
		return err
	}
	cfg, _, err := swarm.Load(env.opts.stateDir)
	if err != nil {
		return err
	}
	if keepEdge {
		fmt.Fprintf(env.dockerCli.Out(), "%s: left serving (system start --adopt on another manager takes it over)\n", cfg.Service)
		return nil
	}
	if err := swarm.CheckOwner(ctx, env.dockerCli.Client(), cfg); errors.Is(err, core.ErrConflict) {
		fmt.Fprintf(env.dockerCli.Out(), "%s: left serving: another state directory drives it now\n", cfg.Service)
		return nil
	} else if err != nil {
		return err
	}
	found, err := swarm.RemoveEdgeService(ctx, env.dockerCli.Client(), cfg.Service)
	if err != nil {
		return err
	}
	if found {
		fmt.Fprintf(env.dockerCli.Out(), "%s: service removed (each task drains for its stop grace)\n", cfg.Service)
	} else {
		fmt.Fprintf(env.dockerCli.Out(), "%s: not running\n", cfg.Service)
	}
	return nil
}

// renderSwarmLine prints "runtime: swarm, 3 nodes (3 ready): n1 ready
// manager, …" on a swarm's state directory (nothing on one engine).
func renderSwarmLine(ctx context.Context, env *cliEnv) {
	if env.platform().Kind != system.Swarm {
		return
	}
	nodes, err := swarm.Nodes(ctx, env.dockerCli.Client())
	if err != nil {
		fmt.Fprintf(env.dockerCli.Out(), "runtime: swarm (nodes unknown: %v)\n\n", err)
		return
	}
	ready := 0
	var parts []string
	for _, n := range nodes {
		if n.Ready {
			ready++
		}
		parts = append(parts, n.String())
	}
	fmt.Fprintf(env.dockerCli.Out(), "runtime: swarm, %d nodes (%d ready): %s\n\n", len(nodes), ready, strings.Join(parts, ", "))
}

// swarmStatusView is system status --format json on a swarm.
type swarmStatusView struct {
	Runtime               string           `json:"runtime"`
	Nodes                 []swarm.Node     `json:"nodes"`
	Edge                  []swarm.EdgeTask `json:"edge_tasks"`
	Reconcile             docker.Status    `json:"reconcile"`
	EdgeAppliedGeneration *uint64          `json:"edge_applied_generation,omitempty"`
	EdgeError             string           `json:"edge_error,omitempty"`
	Config                swarm.Config     `json:"config"`
}

// swarmSystemStatus is system status on a swarm: the nodes, the edge's
// task on each, gordon-reconcile, and the generation every edge applied.
func swarmSystemStatus(ctx context.Context, env *cliEnv, format string) error {
	api := env.dockerCli.Client()
	cfg, _, err := swarm.Load(env.opts.stateDir)
	if err != nil {
		return err
	}
	view := swarmStatusView{Runtime: "swarm", Config: cfg}
	if view.Nodes, err = swarm.Nodes(ctx, api); err != nil {
		return err
	}
	if view.Edge, err = swarm.EdgeTasks(ctx, api, cfg.Service, cfg.Network); err != nil {
		return err
	}
	if view.Reconcile, err = docker.Inspect(ctx, api, docker.ReconcileName); err != nil {
		return err
	}
	if es, err := edgeTrafficStatus(ctx, env); err == nil {
		g := es.AppliedGeneration
		view.EdgeAppliedGeneration, view.EdgeError = &g, es.Error
	} else {
		view.EdgeError = err.Error()
	}
	if isJSON(format) {
		return writeJSON(env.dockerCli.Out(), view)
	}
	w := env.dockerCli.Out()
	ready := 0
	for _, n := range view.Nodes {
		if n.Ready {
			ready++
		}
	}
	fmt.Fprintf(w, "runtime: swarm, %d nodes (%d ready); edge service %s on overlay %s, publishing %s\n", len(view.Nodes), ready, cfg.Service, cfg.Network, swarmPortsText(cfg))
	tw := newTable(w)
	fmt.Fprintln(tw, "NODE\tNODE STATE\tEDGE TASK\tSTATE\tOVERLAY IP")
	for _, n := range view.Nodes {
		task, state, ip := "-", "-", "-"
		for _, et := range view.Edge {
			if et.NodeID == n.ID {
				task, state, ip = shortID(et.ID), et.State, orDash(et.IP)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, n.State, task, state, ip)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := renderSystemStatus(w, view.Reconcile); err != nil {
		return err
	}
	if view.EdgeAppliedGeneration != nil {
		fmt.Fprintf(w, "edge applied generation (every edge): %d\n", *view.EdgeAppliedGeneration)
	}
	if view.EdgeError != "" {
		fmt.Fprintf(w, "edge: %s\n", view.EdgeError)
	}
	return nil
}
