package main

// Docker Swarm. `system start` on a swarm manager puts
// gordon-edge on the nodes as a global service (system/swarm) and writes
// <state>/swarm.json. From then on this state directory's runtime is
// runtime/swarm, and every engine verb runs in a runner container on the
// manager attached to the edge overlay: the probes reach task IPs there,
// and traffic/edge pushes each route table to every edge task over it.

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/remote"
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

// sysEnv is the system plane's environment for this command.
func (e *cliEnv) sysEnv() system.Env {
	return system.Env{
		API:          e.dockerCli.Client(),
		StateDir:     e.opts.stateDir,
		DockerHost:   e.dockerCli.DockerEndpoint().Host,
		Out:          e.dockerCli.Out(),
		Err:          e.dockerCli.Err(),
		Log:          e.logger,
		RegistryAuth: e.registryAuth,
		Records: func() (system.Records, error) {
			s, err := e.openStore()
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		EdgeBinary: system.FindEdgeBinary,
		Platform:   e.platform(),
	}
}

// registerSwarmStartFlags registers system start's swarm flags into o.
func registerSwarmStartFlags(cmd *cobra.Command, o *system.StartOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.Runtime, "runtime", "auto", "auto (swarm when the engine is a swarm manager), docker (this engine only) or swarm")
	fl.StringVar(&o.Swarm.Registry, "registry", "", "on a swarm: the registry (host[:port][/path]) the edge image is pushed to; every node pulls it from there")
	fl.BoolVar(&o.Swarm.Adopt, "adopt", false, "on a swarm: take over the apps whose records another manager's state directory holds even though that manager is up (stop gordon there first)")
	fl.StringVar(&o.Swarm.EdgeNodes, "edge-nodes", "all", "on a swarm: run the edge on all nodes, or only on nodes labelled "+swarm.EdgeNodeLabel+"=true (labelled)")
	fl.StringVar(&o.Swarm.TCPPorts, "tcp-ports", "", "on a swarm: the ports (comma-separated) every edge node publishes for the apps' TCP binds; default: the last start's, else none")
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

// swarmSystemStatus is system status on a swarm: the nodes, the edge's
// task on each, gordon-reconcile, and the generation every edge applied.
func swarmSystemStatus(ctx context.Context, env *cliEnv, format string) error {
	view, err := system.SwarmStatus(ctx, env.sysEnv(), env.edgeStatus)
	if err != nil {
		return err
	}
	cfg := view.Config
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
	fmt.Fprintf(w, "runtime: swarm, %d nodes (%d ready); edge service %s on overlay %s, publishing %s\n", len(view.Nodes), ready, cfg.Service, cfg.Network, system.SwarmPortsText(cfg))
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

// checkSwarmOwner refuses every engine verb from a state directory
// another manager's state directory took over (R80): on a swarm, with the
// engine reached directly (in the runner, or the reconcile container).
func (e *cliEnv) checkSwarmOwner(ctx context.Context) error {
	p := e.platform()
	if p.Kind != system.Swarm || p.NeedsRunner(remote.Current() != nil) || e.ownerInPasses {
		return nil
	}
	return swarm.CheckOwner(ctx, e.dockerCli.Client(), p.Config)
}
