// Package deploy is the deploy flow (R17, R24): submit and precheck a
// revision, plan it, then per service create a candidate, probe it, switch
// traffic and retire the old generation (overlap or sequential), monitor
// it and roll back automatically (R76). It also rebuilds one service for
// the lifecycle verbs (lifecycle_rebuild.go, lifecycle_restart_overlap.go).
//
// Reading order of one deploy (files of this package, the steps package
// below it in brackets):
//
//	deploy.go           Engine.Deploy: checks the request, takes the app
//	                    lock [engine.go Lock, held_checks.go Hold], R68
//	                    [traffic_live.go]
//	deploy_submit.go    submitLocked: Prepare, then
//	deploy_precheck.go  CheckDeployable, then the revision is stored
//	deploy.go           startDeploy: claim the op [ops.go], converge an
//	                    interrupted one (oprun/interrupted.go)
//	deploy_execute.go   executeDeploy: preflight, pin images, secrets and
//	                    binds (the hold's checks passed down), then
//	plan.go             observe and BuildPlan, then per planned service
//	deploy_service.go   runService: overlap or sequential
//	candidate.go        createCandidate, readyOf (package readiness)
//	hooks.go            before_switch, post_start, after_switch
//	deploy_service.go   publishAndRoute [routing.go], retirePredecessor
//	                    or retireSuperseded [retire.go]
//	monitor*.go         R76's watch, then rollback or keep
//	deploy_execute.go   finish: outcome and journal, then
//	deploy.go           notifyDeploy [notify.go] after the unlock
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
