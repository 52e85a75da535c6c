package coretest

import (
	"context"

	"github.com/gordon-deploy/docker-gordon/core"
)

// MSetRestartPolicy is the method name of PolicyRuntime.SetRestartPolicy
// for Fail and Calls.
const MSetRestartPolicy = "set-restart-policy"

// PolicyRuntime is the fake Runtime with core.RestartPolicySetter (R59):
// its containers report their restart policy ("no" when created without
// one), and SetRestartPolicy changes it (event set-restart-policy, detail
// the policy). Wrap a harness's Runtime with it and set Engine.Runtime.
type PolicyRuntime struct{ *Runtime }

var _ core.RestartPolicySetter = PolicyRuntime{}

// CreateContainer implements core.Runtime: Runtime.CreateContainer, and
// the container reports spec.RestartPolicy ("no" when empty).
func (p PolicyRuntime) CreateContainer(ctx context.Context, spec core.ContainerSpec) (string, error) {
	id, err := p.Runtime.CreateContainer(ctx, spec)
	if err != nil {
		return id, err
	}
	p.mu.Lock()
	if c, ok := p.cs[id]; ok {
		c.state.RestartPolicy = policyName(spec.RestartPolicy)
	}
	p.mu.Unlock()
	return id, nil
}

// SetRestartPolicy implements core.RestartPolicySetter; a missing
// container wraps ErrNotFound.
func (p PolicyRuntime) SetRestartPolicy(ctx context.Context, id, policy string) error {
	if err := p.begin(ctx, MSetRestartPolicy, id); err != nil {
		return err
	}
	p.mu.Lock()
	c, ok := p.cs[id]
	if ok {
		c.spec.RestartPolicy = policy
		c.state.RestartPolicy = policyName(policy)
	}
	p.mu.Unlock()
	if !ok {
		return notFound(id)
	}
	p.ev.AddDetail(MSetRestartPolicy, id, policy)
	return nil
}

// RestartPolicy returns the policy container id reports ("" when absent).
func (p PolicyRuntime) RestartPolicy(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.cs[id]; ok {
		return c.state.RestartPolicy
	}
	return ""
}

func policyName(policy string) string {
	if policy == "" {
		return "no"
	}
	return policy
}
