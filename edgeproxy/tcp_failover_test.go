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
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// closingTCP is a backend that accepts a connection, reports it on accepted,
// and closes it without a byte once release is closed: a retired
// generation closing its listener under a connection in flight. With
// replyFirst it answers "old:hello\n" before it closes.
func closingTCP(t *testing.T, replyFirst bool) (addr string, accepted <-chan struct{}, release chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	acc := make(chan struct{}, 16)
	release = make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if replyFirst {
				_, _ = io.WriteString(c, "old:hello\n")
			}
			acc <- struct{}{}
			go func() {
				<-release
				_ = c.Close()
			}()
		}
	}()
	return ln.Addr().String(), acc, release
}

// dialRelay connects to listen and waits until the backend accepted the
// relayed connection.
func dialRelay(t *testing.T, listen string, accepted <-chan struct{}) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	select {
	case <-accepted:
	case <-time.After(3 * time.Second):
		t.Fatal("the backend never saw the relayed connection")
	}
	return c
}

// R67: a connection relayed to a backend just before the switch, which the
// retired backend then closes without a byte, goes to the new backend with
// the bytes the client already sent; the client never sees the failure.
func TestR67_TCPRetiredBackendClosingBeforeFirstByteFailsOver(t *testing.T) {
	e := startEdge(t)
	oldBE, accepted, release := closingTCP(t, false)
	newBE := echoTCP(t, "new")
	listen := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(listen, oldBE)))

	c := dialRelay(t, listen, accepted)
	_, err := io.WriteString(c, "ping\n")
	require.NoError(t, err)
	e.publish(t, tcpTable(2, tcpRoute(listen, newBE)))
	close(release)

	require.NoError(t, c.SetDeadline(time.Now().Add(3*time.Second)))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	require.NoError(t, err, "the relay failed over instead of cutting the client")
	assert.Equal(t, "new:ping\n", line, "the new backend got the replayed bytes")
	assert.Equal(t, "new:more\n", roundTrip(t, c, r, "more"), "the connection stays on the new backend")
	st := e.srv.Status()
	assert.Equal(t, int64(1), openConns(st, newBE), "the connection is counted on its new backend")
	assert.LessOrEqual(t, openConns(st, oldBE), int64(0), "and no longer on the old one")
}

// R67: the listener's current backend closing without a byte is the
// backend's answer, not a failover case: the client sees the close.
func TestR67_TCPCurrentBackendClosingIsNotRetried(t *testing.T) {
	e := startEdge(t)
	be, accepted, release := closingTCP(t, false)
	listen := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(listen, be)))

	c := dialRelay(t, listen, accepted)
	_, err := io.WriteString(c, "ping\n")
	require.NoError(t, err)
	close(release)
	require.NoError(t, c.SetDeadline(time.Now().Add(3*time.Second)))
	_, err = bufio.NewReader(c).ReadString('\n')
	assert.ErrorIs(t, err, io.EOF)
}

// R67: once the backend sent a byte the connection is committed to it: its
// close reaches the client, nothing is replayed elsewhere.
func TestR67_TCPBackendThatAnsweredIsNeverReplaced(t *testing.T) {
	e := startEdge(t)
	oldBE, accepted, release := closingTCP(t, true)
	newBE, newAccepted, _ := closingTCP(t, false)
	listen := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(listen, oldBE)))

	c := dialRelay(t, listen, accepted)
	require.NoError(t, c.SetDeadline(time.Now().Add(3*time.Second)))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "old:hello\n", line)
	e.publish(t, tcpTable(2, tcpRoute(listen, newBE)))
	close(release)
	_, err = r.ReadString('\n')
	assert.ErrorIs(t, err, io.EOF, "the answered connection ends with its backend")
	select {
	case <-newAccepted:
		t.Fatal("an answered connection was replayed to the new backend")
	case <-time.After(200 * time.Millisecond):
	}
}

// R67: a client that half-closed has said all it will say; its bytes may
// have been consumed by the old backend, so they are not replayed.
func TestR67_TCPHalfClosedClientIsNotReplayed(t *testing.T) {
	e := startEdge(t)
	// The old backend reads what it is sent until the half-close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted, halfClosed, release := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		accepted <- struct{}{}
		_, _ = io.Copy(io.Discard, c)
		halfClosed <- struct{}{}
		<-release
		_ = c.Close()
	}()
	oldBE := ln.Addr().String()
	newBE, newAccepted, _ := closingTCP(t, false)
	listen := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(listen, oldBE)))

	c := dialRelay(t, listen, accepted)
	_, err = io.WriteString(c, "fire-and-forget\n")
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	awaitSignal(t, halfClosed, "the relay passes the half-close on")
	e.publish(t, tcpTable(2, tcpRoute(listen, newBE)))
	close(release)
	require.NoError(t, c.SetDeadline(time.Now().Add(3*time.Second)))
	_, err = bufio.NewReader(c).ReadString('\n')
	assert.ErrorIs(t, err, io.EOF)
	select {
	case <-newAccepted:
		t.Fatal("a half-closed client's bytes were replayed")
	case <-time.After(200 * time.Millisecond):
	}
}

// sinkTCP is a push-only backend (a metrics or log sink): it reads lines,
// sends them on got, never answers, and closes after reading what
// arrived once release is closed (an orderly close: nothing unread).
func sinkTCP(t *testing.T, release <-chan struct{}) (addr string, got <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	lines := make(chan string, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				go func() {
					<-release
					_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
				}()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					lines <- l
				}
			}()
		}
	}()
	return ln.Addr().String(), lines
}

// A retired backend of a push-only protocol that read the client's bytes
// and closed in order (FIN, nothing unread) processed them: they are not
// replayed to the new backend (SPEC R67 replays only what the backend
// cannot have consumed); the client sees the close.
func TestR67_TCPOrderlyCloseAfterReadingIsNotReplayed(t *testing.T) {
	e := startEdge(t)
	release := make(chan struct{})
	oldBE, oldGot := sinkTCP(t, release)
	newBE, newGot := sinkTCP(t, make(chan struct{}))
	listen := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(listen, oldBE)))
	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = io.WriteString(c, "metric.a 1\nmetric.b 2\n")
	require.NoError(t, err)
	for range 2 {
		select {
		case <-oldGot:
		case <-time.After(3 * time.Second):
			t.Fatal("the old backend never got the lines")
		}
	}
	e.publish(t, tcpTable(2, tcpRoute(listen, newBE)))
	close(release)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the client sees the retired backend's close")
	select {
	case l := <-newGot:
		t.Fatalf("the new backend got %q again", l)
	case <-time.After(100 * time.Millisecond):
	}
}

// answeringTCP is a backend that reads a line, reports it on got, and
// answers "old:<line>\n" only once answer is closed.
func answeringTCP(t *testing.T) (addr string, got <-chan string, answer chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	lines := make(chan string, 16)
	answer = make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				lines <- line
				<-answer
				_, _ = io.WriteString(c, "old:"+line)
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().String(), lines, answer
}

// waitLive polls the edge's live status (Server.Status, what the admin
// endpoint answers) until ok holds or d passes.
func (e *edge) waitLive(t *testing.T, d time.Duration, ok func(routetable.Status) bool) routetable.Status {
	t.Helper()
	var got routetable.Status
	if !assert.Eventually(t, func() bool {
		st := e.srv.Status()
		got = st
		return ok(st)
	}, d, 10*time.Millisecond) {
		t.Fatalf("the live status never matched; last: %+v", e.srv.Status().Backends)
	}
	return got
}

func backendInFlight(st routetable.Status, addr string) int64 {
	for _, b := range st.Backends {
		if b.Addr == addr {
			return b.InFlight
		}
	}
	return -1
}

// Decision 16: a relayed TCP exchange that the old generation has not
// answered yet counts as in flight on its backend after the switch, so
// the engine's drain waits for it before the stop signal (through a
// published port, a container that closes its listener under a connection
// it has not accepted looks to the edge like an orderly close after the
// client's bytes, which R67 does not replay). Once the backend sent its
// first byte the connection no longer counts, though it stays open.
func TestDecision16_UnansweredTCPExchangeIsInFlightUntilTheBackendAnswers(t *testing.T) {
	e := startEdge(t)
	oldBE, got, answer := answeringTCP(t)
	newBE := echoTCP(t, "new")
	listen := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(listen, oldBE)))

	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "ping\n")
	require.NoError(t, err)
	select {
	case <-got:
	case <-time.After(3 * time.Second):
		t.Fatal("the old backend never got the relayed bytes")
	}
	e.publish(t, tcpTable(2, tcpRoute(listen, newBE)))
	e.waitLive(t, 3*time.Second, func(st routetable.Status) bool { return backendInFlight(st, oldBE) == 1 })

	close(answer)
	require.NoError(t, c.SetDeadline(time.Now().Add(3*time.Second)))
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "old:ping\n", line)
	st := e.waitLive(t, 3*time.Second, func(st routetable.Status) bool { return backendInFlight(st, oldBE) == 0 })
	assert.Equal(t, int64(1), openConns(st, oldBE), "the answered connection stays open on its backend")
}

// Decision 16: a relayed TCP connection on which neither side speaks counts
// as in flight for at most tcpAnswerWait (2 s), so it does not hold a drain
// to its bound.
func TestDecision16_SilentTCPConnectionStopsCountingInFlight(t *testing.T) {
	e := startEdge(t)
	be, _, _ := answeringTCP(t)
	listen := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(listen, be)))
	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c.Close()
	e.waitLive(t, 3*time.Second, func(st routetable.Status) bool { return backendInFlight(st, be) == 1 })
	st := e.waitLive(t, 5*time.Second, func(st routetable.Status) bool { return backendInFlight(st, be) == 0 })
	assert.Equal(t, int64(1), openConns(st, be))
}

// R67 (zero refused): a new connection whose backend refuses the connect
// is not reset at once; it keeps trying the listener's current target
// for a bounded window, so a route switched meanwhile (or an instance
// that starts listening) serves it. On a refusal the old relay closed
// the client, which then read a reset.
func TestR67_TCPRefusedConnectWaitsForTheNextTarget(t *testing.T) {
	retrying := make(chan struct{}, 64)
	defer edgeproxy.SetTCPDialRetryHook(func() {
		select {
		case retrying <- struct{}{}:
		default:
		}
	})()
	e := startEdge(t)
	dead := freePort(t) // nothing listens here: connects are refused
	live := echoTCP(t, "new")
	listen := freePort(t)
	e.publish(t, tcpTable(1, tcpRoute(listen, dead)))

	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "ping\n")
	require.NoError(t, err)
	select {
	case <-retrying: // the connect to dead was refused; the relay waits
	case <-time.After(5 * time.Second):
		t.Fatal("the relay never retried the refused connect")
	}
	e.publish(t, tcpTable(2, tcpRoute(listen, live)))

	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err, "the client was cut instead of waiting for the switch")
	assert.Equal(t, "new:ping\n", line)
}
