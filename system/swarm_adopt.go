package system

// Adoption (SPEC R80): the reconcile loop on a swarm manager
// mirrors every app's records into a Docker config (swarm.Mirror);
// system start on a manager whose state directory does not know an app
// writes those records back, so another manager takes the apps over when
// the one whose state directory held them is lost.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// adoptSwarmEdge reads the running edge service ("found" false when there
// is none) and, for a state directory without swarm.json, takes its
// registry when --registry is not given. A running edge another state
// directory drives is refused when this one was superseded by it
// (wasSwarm), or when its manager is still up, unless --adopt (R80). It
// changes nothing.
func adoptSwarmEdge(ctx context.Context, env Env, api client.APIClient, o *SwarmStartOptions, old swarm.Config, wasSwarm bool) (swarm.RunningEdge, error) {
	e, found, err := swarm.AdoptEdge(ctx, api, swarm.DefaultService)
	if err != nil || !found {
		return swarm.RunningEdge{}, err
	}
	if wasSwarm {
		return e, swarm.CheckOwner(ctx, api, old)
	}
	if o.Registry == "" && e.Registry != "" {
		o.Registry = e.Registry
		fmt.Fprintf(env.Err, "registry %s: the one the running edge service was pushed to\n", e.Registry)
	}
	if e.Owner == "" || o.Adopt {
		return e, nil
	}
	nodes, err := swarm.Nodes(ctx, api)
	if err != nil {
		return e, err
	}
	for _, n := range nodes {
		if n.ID == e.OwnerNode && n.Ready {
			return e, fmt.Errorf("the swarm's edge is driven by another state directory, on manager %s, which is up: run docker gordon with that state directory there (docker --context …). To hand the swarm over, run docker gordon system stop --keep-edge with it, then system start --adopt here; nothing was changed: %w",
				n.Name, core.ErrConflict)
		}
	}
	return e, nil
}

// adoption is what system start adopts: the state configs of the apps
// this state directory does not hold, and the swarm's nodes by ID.
type adoption struct {
	apps    []swarm.Adoptable
	bundles []swarm.Bundle
	nodes   map[string]swarm.Node
	// control is the driving state directory's control record, recovered
	// from the swarm (nil: this state directory has its own, or the
	// swarm has none); its mirror key opened the state configs.
	control *swarm.Control
}

// planAdoption lists the apps the swarm's state configs hold and this
// state directory does not. When the manager that wrote one is still a
// ready node (its state directory is in use), it refuses unless force:
// two state directories would drive the same services. It changes
// nothing.
func planAdoption(ctx context.Context, env Env, api client.APIClient, force bool, ctl *swarm.Control) (adoption, error) {
	all, err := swarm.ListAdoptable(ctx, api)
	if err != nil || len(all) == 0 {
		return adoption{control: ctl}, err
	}
	plan := adoption{control: ctl}
	for _, a := range all {
		// An app this state directory has any record of (held, or
		// removed from here) is this state directory's to decide.
		if _, err := os.Stat(filepath.Join(env.StateDir, "apps", a.App)); errors.Is(err, os.ErrNotExist) {
			plan.apps = append(plan.apps, a)
		} else if err != nil {
			return adoption{}, fmt.Errorf("app %s: %w", a.App, err)
		}
	}
	if len(plan.apps) == 0 {
		return plan, nil
	}
	nodes, err := swarm.Nodes(ctx, api)
	if err != nil {
		return adoption{}, err
	}
	plan.nodes = map[string]swarm.Node{}
	for _, n := range nodes {
		plan.nodes[n.ID] = n
	}
	var live []string
	for _, a := range plan.apps {
		if n, ok := plan.nodes[a.Node]; ok && n.Ready {
			live = append(live, fmt.Sprintf("%s (manager %s)", a.App, n.Name))
		}
	}
	if len(live) > 0 && !force {
		return adoption{}, fmt.Errorf("the swarm runs apps this state directory does not hold: %s; the manager whose state directory holds them is up, so run docker gordon with that state directory there (docker --context …). To hand them over, run docker gordon system stop --keep-edge with it, then system start --adopt here; nothing was changed: %w",
			strings.Join(live, ", "), core.ErrConflict)
	}
	// Read every config now: one that does not decode is skipped (with
	// why), never a failure after the edge changed.
	apps := plan.apps[:0]
	for _, a := range plan.apps {
		b, err := swarm.Fetch(ctx, api, a, mirrorKeyOf(env.StateDir, ctl))
		if err != nil {
			fmt.Fprintf(env.Err, "warning: not adopted: %v\n", err)
			continue
		}
		apps, plan.bundles = append(apps, a), append(plan.bundles, b)
	}
	plan.apps = apps
	return plan, nil
}

// adopt writes each planned app's records into this state directory.
func (p adoption) adopt(env Env) error {
	now := time.Now()
	for i, a := range p.apps {
		if err := swarm.WriteBundle(env.StateDir, p.bundles[i]); err != nil {
			return fmt.Errorf("adopt %w (run system start again to adopt the rest)", err)
		}
		from := a.Node
		if n, ok := p.nodes[a.Node]; ok {
			from = n.Name + ", " + n.State + ","
		}
		fmt.Fprintf(env.Out, "app %s: adopted from the swarm (its records as manager %s wrote them %s); secrets are not adopted: set them again before its next deploy\n",
			a.App, from, swarm.StateAge(a.At, now))
	}
	return nil
}

// adoptedEdgeSettings reads the swarm.json the swarm's state configs hold
// (the state directory that drives the edge wrote it) for a state
// directory without one: its HTTP port and drain become the flags' values
// unless given, and the rest is what system start remembers. Its StateID
// and manager are not taken: they are the other state directory's.
func adoptedEdgeSettings(ctx context.Context, api client.APIClient, o *SwarmStartOptions) (swarm.Config, bool, error) {
	c, found, err := swarm.AdoptableConfig(ctx, api)
	if err != nil || !found {
		return swarm.Config{}, false, err
	}
	c.StateID, c.ManagerNode = "", ""
	if !o.changed("http-addr") && c.HTTPPort > 0 {
		o.HTTPAddr = ":" + strconv.Itoa(c.HTTPPort)
	}
	if !o.changed("drain-timeout") && c.Drain > 0 {
		o.Drain = c.Drain
	}
	return c, true, nil
}

// mirrorKeyOf is the key that opens the state configs: this state
// directory's control record's, else the recovered one's.
func mirrorKeyOf(stateDir string, recovered *swarm.Control) []byte {
	if c, ok, err := swarm.LoadControl(stateDir); err == nil && ok {
		return c.Key()
	}
	if recovered != nil {
		return recovered.Key()
	}
	return nil
}

// recoverControl recovers the control record of the state directory that
// drives the running edge, for a state directory that has none and takes
// the swarm over (not wasSwarm, an edge runs): nil when not needed or the
// swarm has none. The one-shot task runs the running edge's image.
func recoverControl(ctx context.Context, env Env, api client.APIClient, o *SwarmStartOptions, running swarm.RunningEdge, wasSwarm bool) (*swarm.Control, error) {
	if wasSwarm || running.Image == "" {
		return nil, nil
	}
	if _, ok, err := swarm.LoadControl(env.StateDir); err != nil || ok {
		return nil, err
	}
	auth := env.registryAuth(strings.TrimSuffix(o.Registry, "/") + "/gordon-edge")
	c, found, err := swarm.RecoverControl(ctx, api, env.StateDir, o.NodeID, running.Image, auth)
	if err != nil || !found {
		return nil, err
	}
	fmt.Fprintf(env.Out, "control credentials: recovered from the swarm (the running edges keep theirs)\n")
	return &c, nil
}
