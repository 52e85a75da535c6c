package l4

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// echoTCP answers each line on each connection with name:line.
func echoTCP(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, name+":"+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// refusingAddr is a loopback address that refuses every connect for the
// whole test: a socket bound to it that never listens holds the port, so
// no other listener (an echo, the relay itself) can be given it, as one
// freed by freeAddr can.
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// roundTrip sends one line through the relay at listen and returns the
// answer.
func roundTrip(t *testing.T, listen string) string {
	t.Helper()
	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = io.WriteString(c, "ping\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	return line
}

// R21 for TCP: an instance that refuses the connect is ejected through
// Backends (never the last one), the connect goes to the next instance
// and counts as retried, and the next connections skip the ejected one.
// Every count a connection took on a backend is given back when it ends.
func TestR21_TCPRefusedInstanceIsEjectedAndTheConnectGoesToTheNext(t *testing.T) {
	reg := newFakeBackends()
	relays := NewTCPRelays(TCPConfig{Backends: reg, DialTimeout: time.Second})
	t.Cleanup(relays.Close)
	dead, live, listen := refusingAddr(t), echoTCP(t, "live"), freeAddr(t)
	relays.Update([]routetable.L4Route{{Listen: listen, App: "app", Service: "db",
		Backends: []routetable.Backend{{Addr: dead}, {Addr: live}}}})
	require.Zero(t, relays.FailedCount())

	assert.Equal(t, "live:ping\n", roundTrip(t, listen), "the refused connect went to the next instance")
	assert.Equal(t, int64(1), reg.get(dead).connectFailures.Load(), "the refusing instance was ejected")
	assert.Equal(t, int64(1), reg.retried.Load())
	for range 3 {
		assert.Equal(t, "live:ping\n", roundTrip(t, listen))
	}
	assert.Equal(t, int64(1), reg.get(dead).connectFailures.Load(), "the ejected instance is skipped")
	for _, addr := range []string{dead, live} {
		b := reg.get(addr)
		require.Eventually(t, func() bool { return b.open.Load() == 0 && b.inFlight.Load() == 0 },
			5*time.Second, 5*time.Millisecond, "%s: open %d, in flight %d", addr, b.open.Load(), b.inFlight.Load())
	}
}

// A listen address that cannot be bound is reported in ListenerStatus
// with its error and counted in FailedCount; the other listeners serve.
func TestTCPBindFailureIsReportedPerListener(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	relays := NewTCPRelays(TCPConfig{Backends: newFakeBackends(), DialTimeout: time.Second})
	t.Cleanup(relays.Close)
	ok := freeAddr(t)
	relays.Update([]routetable.L4Route{
		{Listen: taken.Addr().String(), Backend: echoTCP(t, "a")},
		{Listen: ok, Backend: echoTCP(t, "b")},
	})
	assert.Equal(t, 1, relays.FailedCount())
	var failed, bound int
	for _, st := range relays.ListenerStatus() {
		assert.Equal(t, "tcp", st.Proto)
		if st.Error != "" {
			failed++
			assert.Equal(t, taken.Addr().String(), st.Addr)
		} else {
			bound++
		}
	}
	assert.Equal(t, 1, failed)
	assert.Equal(t, 1, bound)
	assert.Equal(t, "b:ping\n", roundTrip(t, ok))
}
