package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func tcpService(publish string) core.ServiceSpec {
	return core.ServiceSpec{Name: "echo", Image: "registry.example/echo:1", TCP: []core.L4Interface{{Port: 9000, Publish: publish}}}
}

// R13 port reservation re-check: a publish address another process holds
// fails preflight; nothing is created.
func TestR13_PublishPortTakenFailsPreflight(t *testing.T) {
	h := coretest.NewEngine(t)
	var asked []string
	h.Engine.PortCheck = func(_ context.Context, proto, addr string) error {
		asked = append(asked, proto+" "+addr)
		return errors.New("address already in use")
	}
	_, err := depDeploy(t, h, engine.DeployRequest{}, tcpService("127.0.0.1:19000"))
	require.ErrorIs(t, err, core.ErrConflict)
	require.Contains(t, err.Error(), "127.0.0.1:19000")
	require.Contains(t, err.Error(), "already in use")
	require.Equal(t, []string{"tcp 127.0.0.1:19000"}, asked)
	require.Empty(t, h.Runtime.Created(), "nothing created")
	require.Equal(t, core.StepFailed, depLastOp(t, h).Step(engine.StepPreflight).State)
}

// A service redeployed on the publish address it already holds is not
// re-checked (the edge keeps that listener across the switch); another
// app's routed address is refused without binding.
func TestR13_PublishHeldBySameServiceOrOtherApp(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(tcpService("127.0.0.1:19000")), map[string]string{"echo": "c-old"}, map[string]map[int]int{"echo": {9000: 17000}})
	h.Engine.PortCheck = func(context.Context, string, string) error { return errors.New("in use by the edge") }
	next := tcpService("127.0.0.1:19000")
	next.Image = "registry.example/echo:2"
	_, err := depDeploy(t, h, engine.DeployRequest{}, next)
	require.NoError(t, err, "same service keeps its publish address")

	other := coretest.BlogApp(tcpService("127.0.0.1:19000"))
	other.Name = "shop"
	_, err = h.Engine.SubmitRevision(h.Ctx(), other, "sha-shop")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "shop"})
	require.ErrorIs(t, err, core.ErrConflict)
	require.Contains(t, err.Error(), "already routed to blog/echo")
}

// Found by adversarial testing: a second app declaring a host the first
// already routes made the edge reject the whole table, which then failed
// every later deploy of every app. Preflight refuses it instead.
func TestR13_HostRoutedToAnotherAppRefused(t *testing.T) {
	h := coretest.NewEngine(t)
	h.SeedServing("blog", coretest.BlogApp(coretest.WebSpec(0)), map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {8080: 17000}})
	shop := coretest.BlogApp(coretest.WebSpec(0))
	shop.Name = "shop"
	_, err := h.Engine.SubmitRevision(h.Ctx(), shop, "sha-shop")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "shop"})
	require.ErrorIs(t, err, core.ErrConflict)
	require.Contains(t, err.Error(), "host blog.example.com is already routed to blog/web")
	require.Empty(t, h.Runtime.Created())

	// The owner itself redeploys fine.
	next := coretest.WebSpec(0)
	next.Image = "registry.example/blog:1.5"
	_, err = depDeploy(t, h, engine.DeployRequest{}, next)
	require.NoError(t, err)
}
