package l4

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// echoUDP is a UDP backend that answers every datagram with name + ":" + it.
func echoUDP(t *testing.T, name string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(append([]byte(name+":"), buf[:n]...), from)
		}
	}()
	return pc.LocalAddr().String()
}

func freeUDPPort(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := pc.LocalAddr().String()
	require.NoError(t, pc.Close())
	return addr
}

func udpExchange(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(2*time.Second)))
	_, err := c.Write([]byte(msg))
	require.NoError(t, err)
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	require.NoError(t, err)
	return string(buf[:n])
}

// Decision 11: UDP sessions are pinned per client to the backend they
// started on; after a swap new clients go to the new backend while an
// existing session drains on the old one until it has been idle for the
// idle timeout; its next datagram then opens a session on the new backend.
func TestDecision11_UDPSessionsPinnedThenExpire(t *testing.T) {
	reg := newFakeBackends()
	u := NewUDPRelays(UDPConfig{Backends: reg, IdleTimeout: time.Second}) // long enough for an update on a loaded machine
	t.Cleanup(u.Close)
	oldBE := echoUDP(t, "old")
	newBE := echoUDP(t, "new")
	listen := freeUDPPort(t)
	route := func(backend string) []routetable.L4Route {
		return []routetable.L4Route{{Listen: listen, App: "game", Service: "srv", Backend: backend}}
	}
	u.Update(route(oldBE))

	c1, err := net.Dial("udp", listen)
	require.NoError(t, err)
	defer c1.Close()
	assert.Equal(t, "old:a", udpExchange(t, c1, "a"))
	assert.Equal(t, int64(1), reg.get(oldBE).open.Load())

	u.Update(route(newBE))
	c2, err := net.Dial("udp", listen)
	require.NoError(t, err)
	defer c2.Close()
	assert.Equal(t, "new:b", udpExchange(t, c2, "b"))
	assert.Equal(t, "old:c", udpExchange(t, c1, "c"), "an existing session stays on its backend")
	assert.Contains(t, u.ListenerStatus(), routetable.ListenerStatus{Addr: listen, Proto: "udp"})

	require.Eventually(t, func() bool { return reg.get(oldBE).open.Load() == 0 }, 3*time.Second, 20*time.Millisecond,
		"the old session expires after the idle timeout")
	assert.Equal(t, "new:d", udpExchange(t, c1, "d"), "after expiry the client gets a session on the new backend")
}
