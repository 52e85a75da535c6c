// Package engine is docker gordon's engine (ARCHITECTURE §2, §6): deploy
// (overlap and sequential flows), the lifecycle verbs, reconcile and the
// convergence of interrupted operations, the readiness waiter, the route
// graph, retirement, plans and status. It drives the backends only through
// the interfaces of package core and keeps every step in the Store's
// journal; cmd/docker-gordon wires it, core/coretest fakes its backends.
package engine
