// Package jobs runs an app's scheduled jobs ([jobs.NAME]): each run is a
// new container of the job's service's serving generation, journaled as
// an op of kind job with its exit status and the tail of its output. It
// holds the run (Run), the listing with last and next runs (List), and the
// reconcile watcher's scheduler (Scheduler).
package jobs

import "github.com/gordon-deploy/docker-gordon/core/engine/deploy"

// Engine is the jobs layer of the engine: it embeds the deploy layer
// (the bind policy and the steps a run's container is built with).
type Engine struct{ *deploy.Engine }
