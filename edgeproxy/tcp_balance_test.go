package edgeproxy_test

import (
	"bufio"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// A TCP route with several instances spreads new connections over them
// round-robin; a connection stays on the instance it was relayed to.
func TestReplicas_TCPRelayBalancesConnectionsOverInstances(t *testing.T) {
	e := startEdge(t)
	names := []string{"a", "b", "c"}
	var bs []routetable.Backend
	for _, n := range names {
		bs = append(bs, routetable.Backend{Addr: echoTCP(t, n), Container: "c-" + n})
	}
	listen := freePort(t)
	r := routetable.L4Route{Listen: listen, App: "app", Service: "db", Backend: bs[0].Addr, Container: bs[0].Container, Backends: bs}
	e.publish(t, tcpTable(1, r))

	counts := map[string]int{}
	for range 9 {
		c, err := net.Dial("tcp", listen)
		require.NoError(t, err)
		rd := bufio.NewReader(c)
		got := roundTrip(t, c, rd, "x")
		assert.Equal(t, got, roundTrip(t, c, rd, "x"), "a connection stays on its instance")
		counts[strings.SplitN(got, ":", 2)[0]]++
		require.NoError(t, c.Close())
	}
	assert.Equal(t, map[string]int{"a": 3, "b": 3, "c": 3}, counts)
}

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
