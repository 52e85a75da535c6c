// Package readiness waits for an instance to be ready (SPEC R29–R35): the
// waiter, its TCP, HTTP, log and plugin probes, their cadence and budget.
// It keeps no engine state.
package readiness
