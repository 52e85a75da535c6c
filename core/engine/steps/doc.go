// Package steps holds the engine's settings and in-process memory (Engine,
// State) and the steps every flow composes: the app lock and the memo of
// checks of one hold (heldChecks), the journal's op helpers, the route
// graph and its publication, retirement, binds, secrets, port and ulimit
// checks, image volumes, hook execution and [notify] webhooks.
package steps
