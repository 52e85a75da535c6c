package l4

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

func tcpRoute(listen, backend string) routetable.L4Route {
	return routetable.L4Route{Listen: listen, App: "app", Service: "db", Backend: backend, Container: "c-" + backend}
}

// exchange writes line on a kept connection and reads the echoed reply.
func exchange(t *testing.T, c net.Conn, r *bufio.Reader, line string) string {
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
// listener keeps listening across the swap and the backends count the
// relays they hold.
func TestDecision11_TCPRelayKeepsOldConnNewConnsToNewBackend(t *testing.T) {
	reg := newFakeBackends()
	relays := NewTCPRelays(TCPConfig{Backends: reg, DialTimeout: time.Second})
	t.Cleanup(relays.Close)
	oldBE := echoTCP(t, "old")
	newBE := echoTCP(t, "new")
	listen := freeAddr(t)
	relays.Update([]routetable.L4Route{tcpRoute(listen, oldBE)})

	c1, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c1.Close()
	r1 := bufio.NewReader(c1)
	assert.Equal(t, "old:hello\n", exchange(t, c1, r1, "hello"))
	assert.Equal(t, int64(1), reg.get(oldBE).open.Load())

	relays.Update([]routetable.L4Route{tcpRoute(listen, newBE)})
	c2, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	assert.Equal(t, "new:second\n", exchange(t, c2, r2, "second"))
	assert.Equal(t, "old:still\n", exchange(t, c1, r1, "still"), "the old connection stays on the old backend")
	assert.Equal(t, int64(1), reg.get(oldBE).open.Load())
	assert.Equal(t, int64(1), reg.get(newBE).open.Load())
	assert.Contains(t, relays.ListenerStatus(), routetable.ListenerStatus{Addr: listen, Proto: "tcp"})

	// Half-close: the client shuts its write side, the backend sees EOF and
	// closes, and the client reads EOF after any pending reply.
	require.NoError(t, c2.(*net.TCPConn).CloseWrite())
	_, err = r2.ReadString('\n')
	assert.ErrorIs(t, err, io.EOF)
	require.Eventually(t, func() bool { return reg.get(newBE).open.Load() == 0 }, 3*time.Second, 10*time.Millisecond)
}

// Decision 11: a removed TCP route closes its listener, while a connection
// relayed before the removal continues until a side closes it.
func TestDecision11_TCPRouteRemovedClosesListenerKeepsConns(t *testing.T) {
	relays := NewTCPRelays(TCPConfig{Backends: newFakeBackends(), DialTimeout: time.Second})
	t.Cleanup(relays.Close)
	be := echoTCP(t, "be")
	listen := freeAddr(t)
	relays.Update([]routetable.L4Route{tcpRoute(listen, be)})

	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	assert.Equal(t, "be:one\n", exchange(t, c, r, "one"))

	relays.Update(nil)
	_, err = net.DialTimeout("tcp", listen, time.Second)
	assert.Error(t, err, "listener of a removed route must be closed")
	assert.Equal(t, "be:two\n", exchange(t, c, r, "two"))
}

// A TCP route with several instances spreads new connections over them
// round-robin; a connection stays on the instance it was relayed to.
func TestReplicas_TCPRelayBalancesConnectionsOverInstances(t *testing.T) {
	relays := NewTCPRelays(TCPConfig{Backends: newFakeBackends(), DialTimeout: time.Second})
	t.Cleanup(relays.Close)
	names := []string{"a", "b", "c"}
	var bs []routetable.Backend
	for _, n := range names {
		bs = append(bs, routetable.Backend{Addr: echoTCP(t, n), Container: "c-" + n})
	}
	listen := freeAddr(t)
	relays.Update([]routetable.L4Route{{Listen: listen, App: "app", Service: "db", Backend: bs[0].Addr, Container: bs[0].Container, Backends: bs}})
	counts := map[string]int{}
	for range 9 {
		c, err := net.Dial("tcp", listen)
		require.NoError(t, err)
		rd := bufio.NewReader(c)
		got := exchange(t, c, rd, "x")
		assert.Equal(t, got, exchange(t, c, rd, "x"), "a connection stays on its instance")
		counts[strings.SplitN(got, ":", 2)[0]]++
		require.NoError(t, c.Close())
	}
	assert.Equal(t, map[string]int{"a": 3, "b": 3, "c": 3}, counts)
}
