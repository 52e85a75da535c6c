package steps

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// R62: an interface's tls policy and backend protocol reach the route graph.
func TestR62_BuildGraphCarriesTLSPolicyAndProtocol(t *testing.T) {
	g := BuildGraph([]core.Active{{App: "shop", Services: map[string]*core.ActiveService{
		"web": {Container: "c1", BackendBinds: map[int]int{8080: 41000, 9090: 41001},
			Spec: core.ServiceSpec{HTTP: []core.HTTPInterface{
				{Port: 8080, Host: "shop.example.com", Visibility: core.VisibilityPublic, TLS: core.TLSAlways},
				{Port: 9090, Host: "grpc.example.com", Visibility: core.VisibilityPublic, Protocol: core.ProtocolH2C},
			}}},
	}}})
	require.Len(t, g.HTTP, 2)
	assert.Equal(t, "grpc.example.com", g.HTTP[0].Host)
	assert.Equal(t, "h2c", g.HTTP[0].Protocol)
	assert.Equal(t, "", g.HTTP[0].TLS, "unset policy stays empty (the edge reads it as auto)")
	assert.Equal(t, "always", g.HTTP[1].TLS)
	assert.Equal(t, "", g.HTTP[1].Protocol)
}
