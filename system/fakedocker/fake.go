// Package fakedocker is a hand-written fake of the Docker Engine API calls
// the system plane makes (in the manner of compose's pkg/mocks): a swarm's
// nodes, services, configs and the manager's containers, held in memory.
// Every call is recorded by name; a call the fake does not implement
// panics (the embedded nil client.APIClient), so a test sees at once when
// the code under test reaches further than the fake.
package fakedocker

import (
	"context"
	"fmt"
	"slices"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
)

// Engine is the fake. Set its fields before the code under test runs;
// read Calls after.
type Engine struct {
	client.APIClient

	// Nodes are the swarm's nodes (NodeList).
	Nodes []swarm.Node
	// Services by name (ServiceInspect).
	Services map[string]swarm.Service
	// Configs by ID (ConfigList, ConfigInspect).
	Configs map[string]swarm.Config
	// Networks are the existing networks (NetworkList).
	Networks []network.Summary
	// FailNetworkCreate is NetworkCreate's error (nil: the network is
	// created).
	FailNetworkCreate error

	mu    sync.Mutex
	calls []string
}

// mutating are the calls that change the engine.
var mutating = []string{"NetworkCreate", "ServiceCreate", "ServiceUpdate", "ServiceRemove", "ConfigCreate", "ConfigRemove",
	"ContainerCreate", "ContainerStart", "ContainerStop", "ContainerRemove", "ContainerRename", "ImageBuild", "ImageTag", "ImagePush"}

func (f *Engine) record(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
}

// Calls are the API calls made so far, in order.
func (f *Engine) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Changes are the calls made so far that change the engine, in order.
func (f *Engine) Changes() []string {
	var out []string
	for _, c := range f.Calls() {
		if slices.Contains(mutating, c) {
			out = append(out, c)
		}
	}
	return out
}

func notFound(what string) error { return fmt.Errorf("%s: %w", what, cerrdefs.ErrNotFound) }

// NodeList returns Nodes.
func (f *Engine) NodeList(context.Context, client.NodeListOptions) (client.NodeListResult, error) {
	f.record("NodeList")
	return client.NodeListResult{Items: slices.Clone(f.Nodes)}, nil
}

// ServiceInspect returns the service of that name.
func (f *Engine) ServiceInspect(_ context.Context, name string, _ client.ServiceInspectOptions) (client.ServiceInspectResult, error) {
	f.record("ServiceInspect")
	s, ok := f.Services[name]
	if !ok {
		return client.ServiceInspectResult{}, notFound("service " + name)
	}
	return client.ServiceInspectResult{Service: s}, nil
}

// ConfigList returns the configs carrying every label the filter names
// (a "label" filter of "key" or "key=value").
func (f *Engine) ConfigList(_ context.Context, o client.ConfigListOptions) (client.ConfigListResult, error) {
	f.record("ConfigList")
	var out []swarm.Config
	for _, c := range f.Configs {
		if matchLabels(c.Spec.Labels, o.Filters) {
			out = append(out, c)
		}
	}
	return client.ConfigListResult{Items: out}, nil
}

// ConfigInspect returns the config of that ID.
func (f *Engine) ConfigInspect(_ context.Context, id string, _ client.ConfigInspectOptions) (client.ConfigInspectResult, error) {
	f.record("ConfigInspect")
	c, ok := f.Configs[id]
	if !ok {
		return client.ConfigInspectResult{}, notFound("config " + id)
	}
	return client.ConfigInspectResult{Config: c}, nil
}

// ContainerInspect finds no container: the manager runs no system
// container yet.
func (f *Engine) ContainerInspect(_ context.Context, name string, _ client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	f.record("ContainerInspect")
	return client.ContainerInspectResult{}, notFound("container " + name)
}

// NetworkList returns Networks.
func (f *Engine) NetworkList(context.Context, client.NetworkListOptions) (client.NetworkListResult, error) {
	f.record("NetworkList")
	return client.NetworkListResult{Items: slices.Clone(f.Networks)}, nil
}

// NetworkCreate fails with FailNetworkCreate, else adds the network.
func (f *Engine) NetworkCreate(_ context.Context, name string, o client.NetworkCreateOptions) (client.NetworkCreateResult, error) {
	f.record("NetworkCreate")
	if f.FailNetworkCreate != nil {
		return client.NetworkCreateResult{}, f.FailNetworkCreate
	}
	f.Networks = append(f.Networks, network.Summary{Network: network.Network{Name: name, Driver: o.Driver, Scope: o.Scope, Attachable: o.Attachable}})
	return client.NetworkCreateResult{ID: "net-" + name}, nil
}

func matchLabels(labels map[string]string, filters client.Filters) bool {
	for want := range filters["label"] {
		k, v, hasValue := cut(want)
		got, ok := labels[k]
		if !ok || (hasValue && got != v) {
			return false
		}
	}
	return true
}

func cut(s string) (k, v string, ok bool) {
	for i := range len(s) {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
