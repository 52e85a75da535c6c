package l4

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// udpEcho answers every datagram with itself.
func udpEcho(t *testing.T) string {
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
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
	return pc.LocalAddr().String()
}

// udpRelay runs UDP relays with one listener to an echo backend.
func udpRelay(t *testing.T, tune func(*UDPRelays)) (*UDPRelays, *udpListener) {
	t.Helper()
	u := NewUDPRelays(UDPConfig{Backends: newFakeBackends(), IdleTimeout: time.Minute})
	tune(u)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	listen := pc.LocalAddr().String()
	require.NoError(t, pc.Close())
	u.Update([]routetable.L4Route{{Listen: listen, App: "app", Service: "dns", Backend: udpEcho(t)}})
	t.Cleanup(u.Close)
	require.Len(t, u.listeners, 1, "listener bound")
	return u, u.listeners[listen]
}

func (l *udpListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sessions)
}

// udpClient sends msg from a new socket to addr and reports whether the
// echo came back.
func udpClient(t *testing.T, addr, msg string) (net.Conn, bool) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, udpSend(c, msg)
}

func udpSend(c net.Conn, msg string) bool {
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Write([]byte(msg)); err != nil {
		return false
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	return err == nil && string(buf[:n]) == msg
}

// A listener keeps at most its session bound: a new client beyond it
// closes the least recently active session (the idlest), and the others
// keep working.
func TestUDPSessionsBoundedPerListenerEvictingTheIdlest(t *testing.T) {
	u, l := udpRelay(t, func(u *UDPRelays) { u.maxSessions = 4 })
	addr := l.pc.LocalAddr().String()
	var cs []net.Conn
	for i := range 4 {
		c, ok := udpClient(t, addr, "hello")
		require.True(t, ok, "client %d", i)
		cs = append(cs, c)
	}
	// Each client waited for its answer: cs[0]'s session was the first
	// active and is now, after the others speak again, the idlest.
	for _, c := range cs[1:] {
		require.True(t, udpSend(c, "again")) // cs[0] is now the idlest
	}
	_, ok := udpClient(t, addr, "new")
	require.True(t, ok, "a new client is served")
	assert.Equal(t, 4, l.count())
	l.mu.Lock()
	_, kept := l.sessions[netipOf(t, cs[0])]
	l.mu.Unlock()
	assert.False(t, kept, "the idlest session was evicted")
	for _, c := range cs[1:] {
		assert.True(t, udpSend(c, "still"), "an active session survives")
	}
	assert.LessOrEqual(t, u.open.Load(), int64(5))
}

// One source IP gets at most its share of a listener's sessions.
func TestUDPSessionsBoundedPerSource(t *testing.T) {
	_, l := udpRelay(t, func(u *UDPRelays) { u.maxPerSource = 3 })
	addr := l.pc.LocalAddr().String()
	served := 0
	for range 6 {
		if _, ok := udpClient(t, addr, "x"); ok {
			served++
		}
	}
	assert.Equal(t, 3, served)
	assert.Equal(t, 3, l.count())
}

// All sessions together stay within the descriptor budget (half of the
// process's limit by default), so HTTP keeps descriptors.
func TestUDPSessionsKeepADescriptorReserve(t *testing.T) {
	u, l := udpRelay(t, func(u *UDPRelays) { u.fdBudget = 5 })
	addr := l.pc.LocalAddr().String()
	for range 20 {
		udpClient(t, addr, "x")
		assert.LessOrEqual(t, u.open.Load(), int64(5), "budget 5: an evicted session leaves it when evicted, not when its goroutine ends")
	}
	assert.LessOrEqual(t, l.count(), 5)
	assert.Equal(t, int64(descriptorLimit()/2), NewUDPRelays(UDPConfig{Backends: newFakeBackends()}).fdBudget)
}

// An idle session does not hold a 64 KiB buffer: 400 sessions cost a few
// KiB each (a goroutine and a socket).
func TestUDPIdleSessionsAreSmall(t *testing.T) {
	if raceEnabled {
		t.Skip("memory figures differ under the race detector")
	}
	_, l := udpRelay(t, func(u *UDPRelays) { u.maxPerSource = 1000 })
	addr := l.pc.LocalAddr().String()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 400
	for range n {
		_, ok := udpClient(t, addr, "x")
		require.True(t, ok)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)) / n
	t.Logf("%d bytes per idle UDP session", per)
	assert.Less(t, per, int64(24<<10), "bytes per idle session")
	assert.Equal(t, n, l.count())
}

func netipOf(t *testing.T, c net.Conn) netip.AddrPort {
	t.Helper()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// IPv6 sources are counted per /64 (one host's usual allocation): a client
// cycling through addresses of its own /64 gets no more sessions than one
// address would; another /64 and IPv4 sources count on their own.
func TestUDPSessionsPerSourceCountIPv6By64(t *testing.T) {
	u, l := udpRelay(t, func(u *UDPRelays) { u.maxPerSource = 3 })
	served := 0
	for i := range 8 {
		a := netip.MustParseAddr(fmt.Sprintf("2001:db8:1:2::%x", i+1))
		if u.session(l, netip.AddrPortFrom(a, 5000)) != nil {
			served++
		}
	}
	assert.Equal(t, 3, served, "one /64")
	assert.NotNil(t, u.session(l, netip.MustParseAddrPort("[2001:db8:1:3::1]:5000")), "another /64")
	assert.NotNil(t, u.session(l, netip.MustParseAddrPort("127.0.0.9:5000")))
	assert.NotNil(t, u.session(l, netip.MustParseAddrPort("[::ffff:127.0.0.10]:5000")))
}

// A flood of new sessions from many loopback sources (127.0.0.2 to
// 127.0.0.41, many ports each) keeps the listener within its bounds, and
// the per-source counts match the sessions held.
func TestUDPSessionFloodFromManySourcesStaysBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("binds 127.0.0.x addresses (Linux's whole 127/8 loopback)")
	}
	u, l := udpRelay(t, func(u *UDPRelays) { u.maxSessions, u.maxPerSource = 64, 8 })
	addr := l.pc.LocalAddr().(*net.UDPAddr)
	for src := 2; src < 42; src++ {
		for range 12 {
			c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, byte(src))}, addr)
			require.NoError(t, err)
			_, _ = c.Write([]byte("x"))
			_ = c.Close()
		}
	}
	// The relay reads its socket in order: once a marker sent after the
	// flood is echoed, every datagram of the flood was handled.
	require.Eventually(t, func() bool { _, ok := udpClient(t, addr.String(), "marker"); return ok }, 10*time.Second, 5*time.Millisecond,
		"a datagram after the flood is answered")
	l.mu.Lock()
	n, sum := len(l.sessions), 0
	for src, k := range l.perSource {
		sum += k
		assert.LessOrEqual(t, k, 8, "%s", src)
	}
	l.mu.Unlock()
	assert.LessOrEqual(t, n, 64)
	assert.Equal(t, n, sum, "per-source counts match the sessions")
	assert.LessOrEqual(t, u.open.Load(), int64(64+8))
}
