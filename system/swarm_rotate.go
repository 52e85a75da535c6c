package system

import (
	"context"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// RotateToken is `system rotate-token` on a swarm: new push and edge
// tokens for every running edge task, without replacing one
// (swarm.Rotate). One engine has no control channel: refused, nothing
// changed.
func RotateToken(ctx context.Context, env Env) error {
	cfg, ok, err := swarm.Load(env.StateDir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("rotate-token: only a swarm's edge has control tokens (on one engine the edge's admin token is %s/edge/admin.token); nothing was changed: %w", env.StateDir, core.ErrInvalid)
	}
	if err := swarm.CheckOwner(ctx, env.API, cfg); err != nil {
		return err
	}
	res, err := swarm.Rotate(ctx, env.API, env.StateDir, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "control tokens rotated: generation %d on %d edge task(s), the old push and edge tokens refused from now on\n", res.Generation, res.Edges)
	if res.Baked != res.Generation {
		fmt.Fprintf(env.Out, "the edge service's secret still holds generation %d: a task started from it is brought up to date at its first push; docker gordon system start bakes the new tokens in (replacing each edge task once)\n", res.Baked)
	}
	return nil
}
