package edgeproxy_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

func tcpTable(gen uint64, routes ...routetable.L4Route) routetable.Table {
	return routetable.Table{Schema: routetable.Schema, Generation: gen, Graph: routetable.Graph{TCP: routes}}
}

func tcpRoute(listen, backend string) routetable.L4Route {
	return routetable.L4Route{Listen: listen, App: "app", Service: "db", Backend: backend, Container: "c-" + backend}
}

// roundTrip writes line and reads the echoed reply.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) string {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(3*time.Second)))
	_, err := io.WriteString(c, line+"\n")
	require.NoError(t, err)
	got, err := r.ReadString('\n')
	require.NoError(t, err)
	return got
}

// Decision 11: a TCP listener that cannot bind is reported in status.json
// with its error, the other listeners keep serving, and the failed one is
// bound once its port is free.
func TestDecision11_TCPListenerBindFailureReportedOthersServe(t *testing.T) {
	e := startEdge(t)
	be := echoTCP(t, "be")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close() })
	good := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(busy.Addr().String(), be), tcpRoute(good, be)))

	st := e.readStatus(t)
	assert.Equal(t, uint64(1), st.AppliedGeneration)
	assert.Empty(t, st.Error, "a bind failure is not a table rejection")
	var failed, ok bool
	for _, l := range st.Listeners {
		if l.Addr == busy.Addr().String() {
			failed = l.Error != ""
			assert.Contains(t, l.Error, "address already in use")
		}
		if l.Addr == good {
			ok = l.Error == ""
		}
	}
	assert.True(t, failed, "busy listener reported with an error: %+v", st.Listeners)
	assert.True(t, ok, "good listener reported without error: %+v", st.Listeners)

	c, err := net.Dial("tcp", good)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, "be:x\n", roundTrip(t, c, bufio.NewReader(c), "x"))

	// Once the port is free, the watch loop binds it (retried every 2 s).
	busyAddr := busy.Addr().String()
	require.NoError(t, busy.Close())
	e.waitStatusFor(t, 4*time.Second, func(st routetable.Status) bool {
		for _, l := range st.Listeners {
			if l.Addr == busyAddr {
				return l.Error == ""
			}
		}
		return false
	})
	c3, err := net.Dial("tcp", busyAddr)
	require.NoError(t, err)
	defer c3.Close()
	assert.Equal(t, "be:y\n", roundTrip(t, c3, bufio.NewReader(c3), "y"))
}

func openConns(st routetable.Status, addr string) int64 {
	for _, b := range st.Backends {
		if b.Addr == addr {
			return b.OpenConns
		}
	}
	return -1
}
