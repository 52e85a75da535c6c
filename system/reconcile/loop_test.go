package reconcile

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	passes "github.com/gordon-deploy/docker-gordon/core/engine/reconcile"
)

// A one-shot reconcile of an app the state directory holds no record of
// fails with ErrNotFound naming the app and the state directory; known
// apps (even busy or failing ones) are no such error.
func TestR39_ReconcileOfAnUnknownAppSaysWhereItsRecordsMayBe(t *testing.T) {
	require.NoError(t, UnknownAppsError([]passes.ReconcileReport{{App: "blog"}, {App: "api", Skipped: true}}, "/s"))
	err := UnknownAppsError([]passes.ReconcileReport{{App: "blog"}, {App: "shop", Unknown: true}}, "/var/lib/gordon")
	require.ErrorIs(t, err, core.ErrNotFound)
	require.Contains(t, err.Error(), "app shop: not known to state directory /var/lib/gordon")
	require.NotContains(t, err.Error(), "blog")
}
