// Package deploy is the deploy flow (R17, R24): submit and precheck a revision, plan it, then per service create a candidate, probe it, switch traffic and retire the old generation (overlap or sequential), monitor it and roll back automatically (R76).
package deploy

import "github.com/gordon-deploy/docker-gordon/core/engine/oprun"

// Engine is the deploy layer of the engine: it embeds the oprun layer
// below it, whose steps it composes.
type Engine struct{ *oprun.Engine }

// LifecycleRun is a lifecycle verb's journaled run seen from this layer:
// its steps (oprun) with this layer's engine, so a rebuild can use the
// deploy's candidate, switch and retire steps.
type LifecycleRun struct {
	*oprun.LifecycleRun
	E *Engine
}

// Run is r with this layer's engine.
func (e *Engine) Run(r *oprun.LifecycleRun) *LifecycleRun {
	return &LifecycleRun{LifecycleRun: r, E: e}
}
