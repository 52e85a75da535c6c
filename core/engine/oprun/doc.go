// Package oprun is one journaled operation of an app: its claim under the app lock (lifecycleRun, its steps and result) and the convergence of an interrupted one (R12, R45).
package oprun

import "github.com/gordon-deploy/docker-gordon/core/engine/steps"

// Engine is the oprun layer of the engine: it embeds the steps layer
// below it, whose steps it composes.
type Engine struct{ *steps.Engine }

// Oprun is this layer of e, for the layers above that build a run.
func (e *Engine) Oprun() *Engine { return e }
