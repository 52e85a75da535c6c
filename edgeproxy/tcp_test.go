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

// Decision 11: a TCP connection opened before a swap keeps working on its old
// backend; new connections on the same listener go to the new backend; the
// listener keeps listening across the swap and open_conns counts relays.
func TestDecision11_TCPRelayKeepsOldConnNewConnsToNewBackend(t *testing.T) {
	e := startEdge(t)
	oldBE := echoTCP(t, "old")
	newBE := echoTCP(t, "new")
	listen := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(listen, oldBE)))

	c1, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c1.Close()
	r1 := bufio.NewReader(c1)
	assert.Equal(t, "old:hello\n", roundTrip(t, c1, r1, "hello"))
	assert.Equal(t, int64(1), openConns(e.srv.Status(), oldBE))

	e.publish(t, tcpTable(2, tcpRoute(listen, newBE)))

	c2, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	assert.Equal(t, "new:second\n", roundTrip(t, c2, r2, "second"))
	assert.Equal(t, "old:still\n", roundTrip(t, c1, r1, "still"), "the old connection stays on the old backend")
	st := e.srv.Status()
	assert.Equal(t, int64(1), openConns(st, oldBE))
	assert.Equal(t, int64(1), openConns(st, newBE))
	assert.Contains(t, st.Listeners, routetable.ListenerStatus{Addr: listen, Proto: "tcp"})

	// Half-close: the client shuts its write side, the backend sees EOF and
	// closes, and the client reads EOF after any pending reply.
	require.NoError(t, c2.(*net.TCPConn).CloseWrite())
	_, err = r2.ReadString('\n')
	assert.ErrorIs(t, err, io.EOF)
	require.Eventually(t, func() bool { return openConns(e.srv.Status(), newBE) == 0 }, 3*time.Second, 10*time.Millisecond)
}

// Decision 11: a removed TCP route closes its listener, while a connection
// relayed before the removal continues until a side closes it.
func TestDecision11_TCPRouteRemovedClosesListenerKeepsConns(t *testing.T) {
	e := startEdge(t)
	be := echoTCP(t, "be")
	listen := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(listen, be)))

	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	assert.Equal(t, "be:one\n", roundTrip(t, c, r, "one"))

	e.publish(t, tcpTable(2))
	_, err = net.DialTimeout("tcp", listen, time.Second)
	assert.Error(t, err, "listener of a removed route must be closed")
	assert.Equal(t, "be:two\n", roundTrip(t, c, r, "two"))
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
