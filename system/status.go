package system

import (
	"context"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// EdgeStatus asks the edge for its status (through the traffic backend,
// which the caller holds).
type EdgeStatus func(ctx context.Context) (core.TrafficStatus, error)

// StatusView is system status on one engine (--format json): both system
// containers and the generation the edge applied, or why it is unknown.
type StatusView struct {
	Containers            []docker.Status `json:"containers"`
	EdgeAppliedGeneration *uint64         `json:"edge_applied_generation,omitempty"`
	EdgeError             string          `json:"edge_error,omitempty"`
}

// SwarmStatusView is system status on a swarm (--format json): the
// nodes, the edge's task on each, gordon-reconcile, the generation every
// edge applied, and swarm.json.
type SwarmStatusView struct {
	Runtime               string           `json:"runtime"`
	Nodes                 []swarm.Node     `json:"nodes"`
	Edge                  []swarm.EdgeTask `json:"edge_tasks"`
	Reconcile             docker.Status    `json:"reconcile"`
	EdgeAppliedGeneration *uint64          `json:"edge_applied_generation,omitempty"`
	EdgeError             string           `json:"edge_error,omitempty"`
	Config                swarm.Config     `json:"config"`
}

// edgeApplied is the edge's applied generation, or why it is unknown.
func edgeApplied(ctx context.Context, edge EdgeStatus) (*uint64, string) {
	es, err := edge(ctx)
	if err != nil {
		return nil, err.Error()
	}
	g := es.AppliedGeneration
	return &g, es.Error
}

// Status is system status on one engine.
func Status(ctx context.Context, env Env, edge EdgeStatus) (StatusView, error) {
	var view StatusView
	for _, name := range []string{docker.EdgeName, docker.ReconcileName} {
		st, err := docker.Inspect(ctx, env.API, name)
		if err != nil {
			return view, err
		}
		view.Containers = append(view.Containers, st)
	}
	view.EdgeAppliedGeneration, view.EdgeError = edgeApplied(ctx, edge)
	return view, nil
}

// SwarmStatus is system status on a swarm.
func SwarmStatus(ctx context.Context, env Env, edge EdgeStatus) (SwarmStatusView, error) {
	cfg, _, err := swarm.Load(env.StateDir)
	if err != nil {
		return SwarmStatusView{}, err
	}
	view := SwarmStatusView{Runtime: "swarm", Config: cfg}
	if view.Nodes, err = swarm.Nodes(ctx, env.API); err != nil {
		return view, err
	}
	if view.Edge, err = swarm.EdgeTasks(ctx, env.API, cfg.Service, cfg.Network); err != nil {
		return view, err
	}
	if view.Reconcile, err = docker.Inspect(ctx, env.API, docker.ReconcileName); err != nil {
		return view, err
	}
	view.EdgeAppliedGeneration, view.EdgeError = edgeApplied(ctx, edge)
	return view, nil
}
