package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// A one-shot reconcile of an app the state directory holds no record of
// fails with ErrNotFound naming the app and the state directory; known
// apps (even busy or failing ones) are no such error.
func TestR39_ReconcileOfAnUnknownAppSaysWhereItsRecordsMayBe(t *testing.T) {
	require.NoError(t, unknownAppsError([]engine.ReconcileReport{{App: "blog"}, {App: "api", Skipped: true}}, "/s"))
	err := unknownAppsError([]engine.ReconcileReport{{App: "blog"}, {App: "shop", Unknown: true}}, "/var/lib/gordon")
	require.ErrorIs(t, err, core.ErrNotFound)
	require.Contains(t, err.Error(), "app shop: not known to state directory /var/lib/gordon")
	require.NotContains(t, err.Error(), "blog")
}

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
