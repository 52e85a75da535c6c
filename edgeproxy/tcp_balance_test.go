package edgeproxy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// A table whose TCP backends do not start with its backend is refused.
func TestReplicas_TCPBackendsMustStartWithBackend(t *testing.T) {
	e := startEdge(t)
	a, b := echoTCP(t, "a"), echoTCP(t, "b")
	r := routetable.L4Route{Listen: freePort(t), App: "app", Service: "db", Backend: a,
		Backends: []routetable.Backend{{Addr: b}, {Addr: a}}}
	err := e.srv.Apply(tcpTable(1, r))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "backends must start with backend")
}
