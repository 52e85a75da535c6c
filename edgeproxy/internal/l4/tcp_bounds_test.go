package l4

import (
	"bufio"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// openRelayed opens a connection through the relay at listen and proves it
// relayed with one echo round trip.
func openRelayed(t *testing.T, listen string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	r := bufio.NewReader(c)
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = io.WriteString(c, "ping\n")
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "e:ping\n", line)
	require.NoError(t, c.SetDeadline(time.Time{}))
	return c, r
}

// refused reports whether the relay closed c unserved: its read ends
// without an answer within 5 s.
func refused(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "ping\n")
	_, err := bufio.NewReader(c).ReadString('\n')
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// A TCP route's max_conns bounds its connections at once: one over it is
// closed at accept and counted as refused; once one ends, a new one is
// relayed again.
func TestTCPRouteMaxConnsRefusesTheConnectionOverIt(t *testing.T) {
	relays := NewTCPRelays(TCPConfig{Backends: newFakeBackends(), DialTimeout: time.Second})
	t.Cleanup(relays.Close)
	listen := freeAddr(t)
	relays.Update([]routetable.L4Route{{Listen: listen, App: "app", Service: "db", Backend: echoTCP(t, "e"), MaxConns: 2}})

	a, _ := openRelayed(t, listen)
	openRelayed(t, listen)
	over, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	assert.True(t, refused(t, over), "the third connection is closed")
	assert.Equal(t, int64(1), relays.Refused())

	require.NoError(t, a.Close())
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", listen)
		if err != nil {
			return false
		}
		defer c.Close()
		return !refused(t, c)
	}, 5*time.Second, 10*time.Millisecond, "a connection is relayed again once one ended")
}

// The relays' shared budget bounds every route together: with room for
// three connections, a fourth on another route is refused.
func TestTCPRelayBudgetBoundsEveryRouteTogether(t *testing.T) {
	relays := NewTCPRelays(TCPConfig{Backends: newFakeBackends(), DialTimeout: time.Second, Budget: NewBudget(3, -1)})
	t.Cleanup(relays.Close)
	one, two := freeAddr(t), freeAddr(t)
	be := echoTCP(t, "e")
	relays.Update([]routetable.L4Route{{Listen: one, Backend: be}, {Listen: two, Backend: be}})
	openRelayed(t, one)
	openRelayed(t, one)
	openRelayed(t, two)
	over, err := net.Dial("tcp", two)
	require.NoError(t, err)
	assert.True(t, refused(t, over))
}

// The descriptor budget is the limit less the reserve, two descriptors a
// TCP connection, one a UDP session: a budget of 20 descriptors relays ten
// connections, and never an eleventh.
func TestRelayBudgetKeepsTheDescriptorReserve(t *testing.T) {
	limit := descriptorLimit()
	b := NewBudget(100, limit-20)
	_, fds := b.Limits()
	require.Equal(t, int64(20), fds)
	for i := range 10 {
		require.True(t, b.acquire(tcpRelayFDs), "connection %d", i)
	}
	assert.False(t, b.acquire(1), "the reserve is not touched")
	b.release(tcpRelayFDs)
	assert.True(t, b.acquire(1))
	_, def := NewBudget(0, -1).Limits()
	assert.Equal(t, int64(max(limit-DefaultDescriptorReserve(limit), 16)), def)
	assert.Equal(t, 256, DefaultDescriptorReserve(1024), "1,024 descriptors: 768 for the relays")
	assert.Equal(t, 1024, DefaultDescriptorReserve(4096))
}

// A relayed TCP connection silent both ways for its route's idle timeout
// is closed, not before; one that keeps talking stays open.
func TestTCPRelayIdleTimeoutClosesASilentConnection(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the idle timeout reads TCP_INFO (Linux)")
	}
	const idle = 300 * time.Millisecond
	relays := NewTCPRelays(TCPConfig{Backends: newFakeBackends(), DialTimeout: time.Second})
	t.Cleanup(relays.Close)
	listen := freeAddr(t)
	relays.Update([]routetable.L4Route{{Listen: listen, Backend: echoTCP(t, "e"), IdleTimeoutMS: idle.Milliseconds()}})

	talker, tr := openRelayed(t, listen)
	start := time.Now() // before quiet's last byte: its silence is at most this long
	quiet, _ := openRelayed(t, listen)
	closed := make(chan time.Duration, 1)
	go func() {
		_ = quiet.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = quiet.Read(make([]byte, 1))
		closed <- time.Since(start)
	}()
	tick := time.NewTicker(idle / 4)
	defer tick.Stop()
	for time.Since(start) < 3*idle {
		_, err := io.WriteString(talker, "ping\n")
		require.NoError(t, err)
		line, err := tr.ReadString('\n')
		require.NoError(t, err, "a talking connection stays open")
		require.Equal(t, "e:ping\n", line)
		<-tick.C
	}
	select {
	case d := <-closed:
		assert.GreaterOrEqual(t, d, idle, "closed no earlier than the idle timeout")
	case <-time.After(5 * time.Second):
		t.Fatal("the silent connection was never closed")
	}
}
