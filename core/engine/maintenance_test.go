package engine_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/access"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// maintRoute returns the last published HTTP route of host.
func maintRoute(t *testing.T, h *coretest.Harness, host string) routetable.HTTPRoute {
	t.Helper()
	for _, r := range h.Traffic.Last().HTTP {
		if r.Host == host {
			return r
		}
	}
	t.Fatalf("no route for %s in %+v", host, h.Traffic.Last().HTTP)
	return routetable.HTTPRoute{}
}

// R75: maintenance on is journaled, sets the record and publishes every
// HTTP route of the app with it, leaving containers and ACTIVE alone;
// off clears it and republishes.
func TestR75_MaintenanceOnOffJournaledAndPublished(t *testing.T) {
	h := lcSeed(t, "c-web", 18080, 0)
	before, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	res, err := h.Engine.Maintenance(h.Ctx(), engine.MaintenanceRequest{App: "blog", On: true, Message: "back at 5 <pm>", Allow: []string{"10.1.2.3/8", "127.0.0.1"}})
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	op := lcLatest(t, h)
	assert.Equal(t, engine.OpMaintenance, op.Kind)
	assert.Equal(t, core.StepSucceeded, lcStep(t, op, engine.StepIntentMaintenance).State)
	in, err := h.Store.LoadIntent(h.Ctx(), "blog")
	require.NoError(t, err)
	require.NotNil(t, in.Maintenance)
	assert.Equal(t, []string{"10.0.0.0/8", "127.0.0.1/32"}, in.Maintenance.Allow, "allow entries are stored masked")
	info, err := h.Engine.MaintenanceStatus(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, engine.MaintenanceInfo{App: "blog", On: true, Message: "back at 5 <pm>", Allow: in.Maintenance.Allow, Since: op.StartedAt, Op: op.ID}, info)
	r := maintRoute(t, h, "blog.example.com")
	require.NotNil(t, r.Maintenance, "the route carries the maintenance record")
	assert.Equal(t, "back at 5 <pm>", r.Maintenance.Message)
	assert.Equal(t, []string{"10.0.0.0/8", "127.0.0.1/32"}, r.Maintenance.Allow)
	assert.NotEmpty(t, r.Backends, "the backends stay routed (allowed clients are proxied)")
	after, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, before, after, "ACTIVE is untouched")
	for _, k := range []string{"create", "start", "stop", "remove"} {
		assert.Equal(t, 0, h.Events.Count(k, ""), "%s: containers are untouched", k)
	}

	_, err = h.Engine.Maintenance(h.Ctx(), engine.MaintenanceRequest{App: "blog"})
	require.NoError(t, err)
	assert.Equal(t, "off", lcStep(t, lcLatest(t, h), engine.StepIntentMaintenance).Detail)
	in, err = h.Store.LoadIntent(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Nil(t, in.Maintenance)
	assert.Nil(t, maintRoute(t, h, "blog.example.com").Maintenance)
	info, err = h.Engine.MaintenanceStatus(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, engine.MaintenanceInfo{App: "blog"}, info)
}

// R75: a deploy, a restart, and stop/start keep maintenance on the
// routes they publish.
func TestR75_MaintenanceKeptAcrossDeployAndRestart(t *testing.T) {
	h := lcSeed(t, "c-web", 18080, 0)
	_, err := h.Engine.Maintenance(h.Ctx(), engine.MaintenanceRequest{App: "blog", On: true, Message: "upgrade"})
	require.NoError(t, err)
	spec := coretest.WebSpec(0)
	spec.Env = map[string]string{"V": "2"}
	_, err = h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(spec), "v2")
	require.NoError(t, err)
	applied := h.Traffic.Applied()
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	require.Greater(t, h.Traffic.Applied(), applied, "the deploy published routes")
	for i, g := range h.Traffic.Graphs()[applied:] {
		for _, r := range g.HTTP {
			require.NotNil(t, r.Maintenance, "graph %d of the deploy: host %s lost maintenance", i, r.Host)
			assert.Equal(t, "upgrade", r.Maintenance.Message)
		}
	}
	_, err = h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	assert.NotNil(t, maintRoute(t, h, "blog.example.com").Maintenance, "kept across restart")
	_, err = h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	_, err = h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	in, err := h.Store.LoadIntent(h.Ctx(), "blog")
	require.NoError(t, err)
	require.NotNil(t, in.Maintenance, "stop and start keep the record")
	assert.NotNil(t, maintRoute(t, h, "blog.example.com").Maintenance)
}

// R75: a refusal changes nothing: unknown app, bad allow, message with off.
func TestR75_MaintenanceRefusalsChangeNothing(t *testing.T) {
	h := lcSeed(t, "c-web", 18080, 0)
	h.Reset()
	ops, err := h.Store.ListOps(h.Ctx(), "blog")
	require.NoError(t, err)
	cases := []struct {
		req  engine.MaintenanceRequest
		want error
	}{
		{engine.MaintenanceRequest{App: "nope", On: true}, core.ErrNotFound},
		{engine.MaintenanceRequest{App: "blog", On: true, Allow: []string{"10.0.0.0/33"}}, core.ErrInvalid},
		{engine.MaintenanceRequest{App: "blog", Message: "x"}, core.ErrInvalid},
		{engine.MaintenanceRequest{App: "blog", On: true, Message: string(make([]byte, access.MaxMaintenanceMessage+1))}, core.ErrInvalid},
		{engine.MaintenanceRequest{On: true}, core.ErrInvalid},
	}
	for _, c := range cases {
		res, err := h.Engine.Maintenance(h.Ctx(), c.req)
		assert.Nil(t, res)
		assert.True(t, errors.Is(err, c.want), "%+v: %v", c.req, err)
	}
	after, err := h.Store.ListOps(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Equal(t, len(ops), len(after), "no op journaled")
	assert.Equal(t, 0, h.Traffic.Attempts(), "nothing published")
	in, err := h.Store.LoadIntent(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Nil(t, in.Maintenance)
}
