// Package reconcile converges what runs with what is recorded: the reconcile pass, the sweep of stranded containers and claims, and boot.
package reconcile

import "github.com/gordon-deploy/docker-gordon/core/engine/lifecycle"

// Engine is the reconcile layer of the engine: it embeds the lifecycle layer
// below it, whose steps it composes.
type Engine struct{ *lifecycle.Engine }
