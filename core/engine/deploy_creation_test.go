package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// S31 (the parts this engine implements): the candidate joins the app's
// private network with alias and hostname = service, joins the app's shared
// networks at creation (before start), mounts a read-only volume read-only,
// and every start is followed by an inspect observing the start time.
// Egress policy, resource limits and CDI devices are not implemented.
func TestS31_CandidateCreationDetails(t *testing.T) {
	h := coretest.NewEngine(t)
	spec := core.ServiceSpec{
		Name: "db", Image: "registry.example/pg:16",
		TCP:     []core.L4Interface{{Port: 5432}},
		Volumes: []core.VolumeMount{{Name: "seed", Path: "/seed", ReadOnly: true}, {Name: "data", Path: "/data"}},
	}
	app := coretest.BlogApp(spec)
	app.Networks = []string{"shared-net"}
	_, err := h.Engine.SubmitRevision(h.Ctx(), app, "sha-s31")
	require.NoError(t, err)
	h.Reset()
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)

	created := h.Runtime.Created()
	require.Len(t, created, 1)
	c := created[0]
	require.Equal(t, engine.NetworkName("blog"), c.Network)
	require.Equal(t, []string{"db"}, c.Aliases)
	require.Equal(t, "db", c.Hostname)
	require.Equal(t, []string{"shared-net"}, c.ExtraNetworks)
	ro := map[string]bool{}
	for _, m := range c.Mounts {
		ro[m.Target] = m.ReadOnly
	}
	require.Equal(t, map[string]bool{"/seed": true, "/data": false}, ro)

	// The private network is ensured once in preflight, and every start is
	// followed by an inspect.
	seq := h.Events.Seq("start", "inspect")
	require.GreaterOrEqual(t, len(seq), 2)
	for i, e := range seq {
		if e[:5] == "start" {
			require.Less(t, i+1, len(seq), "an inspect follows start")
			require.Equal(t, "inspect"+e[5:], seq[i+1])
		}
	}
	require.Equal(t, 1, h.Events.Count("ensure-network", engine.NetworkName("blog")))
}
