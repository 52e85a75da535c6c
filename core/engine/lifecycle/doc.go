// Package lifecycle holds the lifecycle verbs on a deployed app: start, stop, restart, remove, rollback, scale, maintenance, and the read-only status, revisions, logs and exec.
package lifecycle

import (
	"github.com/gordon-deploy/docker-gordon/core/engine/deploy"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
)

// Engine is the lifecycle layer of the engine: it embeds the deploy layer
// below it, whose steps it composes.
type Engine struct{ *deploy.Engine }

// LifecycleRun is a lifecycle verb's journaled run with this layer's
// engine (see deploy.LifecycleRun).
type LifecycleRun struct {
	*deploy.LifecycleRun
	E *Engine
	// data, when set, is done between the stop and the start of an
	// in-place restart (snapshots create and restore).
	data *dataAction
}

// Run is r with this layer's engine.
func (e *Engine) Run(r *oprun.LifecycleRun) *LifecycleRun {
	return &LifecycleRun{LifecycleRun: e.Engine.Run(r), E: e}
}
