// Package volsnap is the engine's volume snapshots (docs/data.md): take
// one of a service's volumes from its stopped generation into the
// snapshot store, journaled as a step, with the policy's size bound and
// the retention by keep; restore one into the volumes; and the verbs that
// do either under the app lock (`snapshots create|restore`).
package volsnap
