// Package engine is docker gordon's engine (ARCHITECTURE §2, §6), the
// app plane's use cases. It drives the backends only through the
// interfaces of package core and keeps every step in the Store's journal;
// cmd/docker-gordon wires it, core/coretest fakes its backends.
//
// This package is the facade: Engine (the settings the CLI fills in) and
// the API every caller uses. The work is in layers, each a package that
// embeds the one below it:
//
//	reconcile  the reconcile pass, sweeps, boot
//	lifecycle  start, stop, restart, remove, rollback, scale, maintenance,
//	           status, revisions, logs, exec
//	deploy     submit, precheck, plan, candidate, switch, retire, monitor
//	           and automatic rollback, rebuilds of a service
//	oprun      one journaled operation: claim, lifecycle run, recovery of
//	           an interrupted one
//	steps      settings and the memory of one process (State), the app
//	           lock and its memo of checks, journal helpers, routing,
//	           retire, binds, secrets, ports, hooks, notify
//	readiness  the readiness waiter and its probes (no engine state)
package engine
