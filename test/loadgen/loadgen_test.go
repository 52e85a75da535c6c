package loadgen

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckLoopback_RefusesOtherAddresses(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:80", "127.1.2.3:1", "[::1]:8080", "localhost:1", "127.0.0.1"} {
		assert.NoError(t, CheckLoopback(ok), ok)
	}
	for _, bad := range []string{"10.0.0.1:80", "example.org:80", "[2001:db8::1]:443", ""} {
		assert.ErrorIs(t, CheckLoopback(bad), ErrNotLoopback, bad)
	}
	_, err := StartHTTP(HTTPConfig{URL: "http://192.0.2.1/", Clients: 1})
	assert.ErrorIs(t, err, ErrNotLoopback)
	_, err = StartTCP(TCPConfig{Addr: "192.0.2.1:9", Dialers: 1})
	assert.ErrorIs(t, err, ErrNotLoopback)
	_, err = RunRaw(RawConfig{Addr: "192.0.2.1:9", Conns: 1, Duration: time.Millisecond})
	assert.ErrorIs(t, err, ErrNotLoopback)
}

// The HTTP driver counts 2xx, non-2xx and a client going back to an
// instance it left, each apart, and stops at its request bound.
func TestHTTP_CountsFailuresRegressionsAndStopsAtItsBound(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch i := n.Add(1); {
		case i == 3:
			w.WriteHeader(http.StatusBadGateway)
		case i <= 5:
			fmt.Fprint(w, "instance=a")
		case i <= 7:
			fmt.Fprint(w, "instance=b")
		default:
			fmt.Fprint(w, "instance=a")
		}
	}))
	defer srv.Close()
	r, err := StartHTTP(HTTPConfig{URL: srv.URL + "/", Host: "x.test", Clients: 1,
		Identity: func(b []byte) string { return string(b) }, Label: func(int) string { return "h1" },
		Bounds: Bounds{MaxRequests: 10}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { a, _ := r.Snapshot(); return a == 10 }, 5*time.Second, 5*time.Millisecond)
	st := r.Stop()
	assert.True(t, st.Bounded)
	assert.Equal(t, int64(10), st.Answered)
	assert.Equal(t, int64(9), st.OK)
	assert.Equal(t, int64(1), st.Non2xx)
	assert.Equal(t, int64(1), st.Failed())
	assert.Equal(t, int64(1), st.Regressions, "a -> b -> a")
	assert.Equal(t, map[string]int64{"h1": 10}, st.ByLabel)
	assert.Contains(t, st.Errors, "h1: status 502: ")
	assert.Positive(t, st.Max)
}

// A dead port is a transport failure, paced by FailurePause.
func TestHTTP_DeadPortIsTransportFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	r, err := StartHTTP(HTTPConfig{URL: "http://" + addr + "/", Clients: 2, FailurePause: 10 * time.Millisecond, AbortOnStop: true})
	require.NoError(t, err)
	// The behaviour under test is pacing over time: failures in 100 ms
	// are bounded by the 10 ms pause.
	time.Sleep(100 * time.Millisecond)
	st := r.Stop()
	assert.Zero(t, st.OK)
	assert.Positive(t, st.Transport)
	assert.Less(t, st.Transport, int64(40), "paced by the pause")
	assert.Equal(t, st.Transport, st.Requests())
}

// The raw driver completes keep-alive and one-shot requests.
func TestRaw_KeepAliveAndOneShot(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	for _, one := range []bool{false, true} {
		res, err := RunRaw(RawConfig{Addr: addr, Host: "b.test", Conns: 2, Duration: 100 * time.Millisecond, OneShot: one})
		require.NoError(t, err)
		assert.Positive(t, res.Requests)
		assert.Zero(t, res.Errors)
		assert.Positive(t, res.RPS())
		m := MergeRaw([]RawResult{res, res})
		assert.Equal(t, 2*res.Requests, m.Requests)
	}
	_, err := RunRaw(RawConfig{Addr: addr, Conns: 1})
	assert.Error(t, err, "a run needs a duration")
}

// The TCP driver counts refused connects apart from broken exchanges.
func TestTCP_RefusedApartFromBroken(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer echo.Close()
	var k atomic.Int64
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				if k.Add(1)%2 == 0 {
					return // broken: no answer
				}
				fmt.Fprint(c, line)
			}()
		}
	}()
	r, err := StartTCP(TCPConfig{Addr: echo.Addr().String(), Dialers: 1, Bounds: Bounds{MaxRequests: 6}})
	require.NoError(t, err)
	require.Eventually(t, r.bounded.Load, 10*time.Second, 5*time.Millisecond, "the run reaches its bound")
	st := r.Stop()
	assert.Equal(t, TCPStats{Dials: 6, Broken: 3, Bounded: true}, st)

	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := dead.Addr().String()
	dead.Close()
	r, err = StartTCP(TCPConfig{Addr: addr, Dialers: 1, Bounds: Bounds{MaxRequests: 5}})
	require.NoError(t, err)
	require.Eventually(t, r.bounded.Load, 10*time.Second, 5*time.Millisecond, "the run reaches its bound")
	st = r.Stop()
	assert.Equal(t, TCPStats{Dials: 5, Refused: 5, Bounded: true}, st)
}
