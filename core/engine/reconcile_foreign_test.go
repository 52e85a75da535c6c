package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
)

// workloadOf seeds a running workload container labelled for app/service
// that no record of this state directory names.
func workloadOf(h *coretest.Harness, id, app, service string) {
	h.Runtime.AddContainer(id, core.ContainerState{Labels: map[string]string{
		core.LabelManaged: "true", core.LabelRole: "workload", core.LabelApp: app, core.LabelService: service,
	}}, map[int]int{8080: 17100})
}

// R39 with several state directories on one engine: the watcher is woken
// by another state directory's containers (their events carry only the app
// label). A pass for an app this state directory holds no record of takes
// no lock and removes nothing, while a container of a known app that no
// record owns is still removed in the same pass.
func TestR39_PassNeverTouchesAnAppOfAnotherStateDirectory(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-new"}, map[string]map[int]int{"web": {8080: 18081}})
	workloadOf(h, "c-foreign", "shop", "web")
	workloadOf(h, "c-stray", "blog", "web")

	reps, err := h.Engine.Reconcile(h.Ctx(), []string{"shop", "blog"})
	require.NoError(t, err)
	require.Len(t, reps, 2)
	require.Equal(t, "shop", reps[0].App)
	require.True(t, reps[0].Unknown, "shop is not known here")
	require.False(t, reps[1].Unknown, "blog is known here")

	require.True(t, h.Runtime.Exists("c-foreign"), "another state directory's container is left alone")
	require.Equal(t, -1, h.Events.Index("stop", "c-foreign"))
	require.Equal(t, -1, h.Events.Index("remove", "c-foreign"))
	require.False(t, h.Runtime.Exists("c-stray"), "a container of a known app that no record owns is removed")
	require.True(t, h.Runtime.Exists("c-new"), "the serving container stays")

	// A pass over every app lists only the apps known here.
	reps, err = h.Engine.Reconcile(h.Ctx(), nil)
	require.NoError(t, err)
	for _, r := range reps {
		require.NotEqual(t, "shop", r.App)
	}
	require.True(t, h.Runtime.Exists("c-foreign"))
}
