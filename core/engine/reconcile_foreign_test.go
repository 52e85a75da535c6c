package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// workloadOf seeds a running workload container labelled for app/service
// (and for app's incarnation here, when this state directory knows app)
// that no record of this state directory names.
func workloadOf(h *coretest.Harness, id, app, service string) {
	labels := map[string]string{core.LabelManaged: "true", core.LabelRole: "workload", core.LabelApp: app, core.LabelService: service}
	if info, err := h.Store.LoadApp(h.Ctx(), app); err == nil {
		labels[core.LabelIncarnation] = info.Incarnation
	}
	h.Runtime.AddContainer(id, core.ContainerState{Labels: labels}, map[int]int{8080: 17100})
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

// R13 for the app name: a deploy of a name whose containers on the engine
// carry another incarnation (deployed from another state directory) is
// refused before anything is stored, naming the container; the state
// directory's own containers (its incarnation) are no obstacle.
func TestR13_AppNameDeployedFromAnotherStateDirectoryIsRefused(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Runtime.AddContainer("c-theirs-0123456789", core.ContainerState{Labels: map[string]string{
		core.LabelManaged: "true", core.LabelRole: "workload", core.LabelApp: "blog", core.LabelService: "web",
		core.LabelIncarnation: "inc-of-another-state-dir",
	}}, nil)
	err := h.Engine.CheckDeployable(h.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), "")
	require.ErrorIs(t, err, core.ErrConflict)
	require.Contains(t, err.Error(), "app blog already has container c-theirs-012")
	require.Contains(t, err.Error(), "another state directory")
	apps, lerr := h.Store.ListApps(h.Ctx())
	require.NoError(t, lerr)
	require.Empty(t, apps, "a refusal stores nothing")
	require.True(t, h.Runtime.Running("c-theirs-0123456789"))

	own := coretest.NewEngine(t)
	own.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-new"}, map[string]map[int]int{"web": {8080: 18081}})
	workloadOf(own, "c-own-stray", "blog", "web")
	require.NoError(t, own.Engine.CheckDeployable(own.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), ""))
}

// R39 after a remove: the app's history stays here, its incarnation has
// ended. A pass for it (also the one after a CLI killed right after the
// remove's last write) succeeds with nothing to do, reports Ended, takes no
// lock and leaves alone a container of that name deployed since from
// another state directory.
func TestR39_ReconcileOfARemovedAppHasNothingToDo(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-new"}, map[string]map[int]int{"web": {8080: 18081}})
	_, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	require.False(t, h.Runtime.Exists("c-new"))
	workloadOf(h, "c-theirs", "blog", "web")

	reps, err := h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	require.Len(t, reps, 1)
	require.True(t, reps[0].Ended, "blog's incarnation here ended with its remove")
	require.False(t, reps[0].Unknown, "blog's history is here")
	require.True(t, h.Runtime.Exists("c-theirs"), "a container of that name from another state directory is left alone")
	require.Equal(t, -1, h.Events.Index("stop", "c-theirs"))
}

// R13 as validate checks it: a public host or a publish address another
// app routes is refused with its owner, one error per service; the app's
// own routes are no conflict; the store is only read.
func TestR13_ValidateRefusesAHostOrPortAnotherAppRoutes(t *testing.T) {
	h := coretest.NewEngine(t)
	other := coretest.WebSpec(0)
	other.HTTP[0].Host = "other.example.com"
	other.TCP = []core.L4Interface{{Port: 5432, Publish: "127.0.0.1:15432"}}
	h.SeedServing("other", core.AppSpec{Name: "other", Services: []core.ServiceSpec{other}}, map[string]string{"web": "c-other"}, map[string]map[int]int{"web": {8080: 17000}})
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-blog"}, map[string]map[int]int{"web": {8080: 17001}})
	web := coretest.WebSpec(0)
	web.HTTP[0].Host = "Other.Example.com" // other's host, in another case
	db := core.ServiceSpec{Name: "db", Image: "pg:15", TCP: []core.L4Interface{{Port: 5432, Publish: "127.0.0.1:15432"}}}
	err := h.Engine.CheckRoutesFree(h.Ctx(), core.AppSpec{Name: "shop", Services: []core.ServiceSpec{web, db}})
	require.ErrorIs(t, err, core.ErrConflict)
	require.Contains(t, err.Error(), "service web: state conflict: host Other.Example.com is already routed to other/web")
	require.Contains(t, err.Error(), "service db: state conflict: publish 127.0.0.1:15432/tcp is already routed to other/web")

	both := web
	both.TCP = db.TCP
	err = h.Engine.CheckRoutesFree(h.Ctx(), core.AppSpec{Name: "shop", Services: []core.ServiceSpec{both}})
	require.Contains(t, err.Error(), "host Other.Example.com is already routed to other/web", "every conflict of a service at once")
	require.Contains(t, err.Error(), "publish 127.0.0.1:15432/tcp is already routed to other/web", "every conflict of a service at once")

	require.NoError(t, h.Engine.CheckRoutesFree(h.Ctx(), coretest.BlogApp(coretest.WebSpec(0))), "blog's own host is no conflict")
	apps, err := h.Store.ListApps(h.Ctx())
	require.NoError(t, err)
	require.Equal(t, []string{"blog", "other"}, apps, "validate stores nothing")
}
