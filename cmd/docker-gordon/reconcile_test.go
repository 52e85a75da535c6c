package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// A watcher prints an app's plain "ok" pass once, then again only after
// something else happened to the app (a retire, an error, a different
// count).
func TestOkPasses_AWatcherSaysAnUnchangedOkPassOnce(t *testing.T) {
	q := okPasses{}
	ok := engine.ReconcileReport{App: "web", Verified: []string{"a"}}
	assert.False(t, q.same(ok), "the first ok pass is printed")
	assert.True(t, q.same(ok), "the same ok pass is not")
	assert.False(t, q.same(engine.ReconcileReport{App: "kv", Verified: []string{"b"}}), "another app's is")
	retired := engine.ReconcileReport{App: "web", Verified: []string{"a"}, Retired: []string{"x"}}
	assert.False(t, q.same(retired), "a pass that did something is printed")
	assert.False(t, q.same(ok), "and the next ok pass is printed again")
	assert.False(t, q.same(engine.ReconcileReport{App: "web", Verified: []string{"a", "b"}}), "a different count is printed")
}
