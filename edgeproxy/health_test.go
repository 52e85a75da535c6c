package edgeproxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// Passive health at the edge (SPEC R21).

// ejectFor runs an edge whose ejections last d (first) up to 4×d.
func ejectFor(d time.Duration) func(*edgeproxy.Config) {
	return func(c *edgeproxy.Config) { c.EjectBase, c.EjectMax = d, 4*d }
}

// resetBackend accepts connections and resets them before any answer
// (SO_LINGER 0 after reading the request's first bytes).
func resetBackend(t *testing.T) string {
	t.Helper()
	return serveConns(t, func(c net.Conn, br *bufio.Reader) {
		_, _ = br.ReadString('\n')
		_ = c.(*net.TCPConn).SetLinger(0)
	})
}

// stallBackend accepts connections, reads the request and never answers
// (until the edge closes the connection).
func stallBackend(t *testing.T) string {
	t.Helper()
	return serveConns(t, func(c net.Conn, _ *bufio.Reader) {
		_, _ = io.Copy(io.Discard, c)
	})
}

// ejection returns the status of addr on e (the zero value when unknown).
func ejection(e *edge, addr string) routetable.BackendStatus {
	for _, b := range e.srv.Status().Backends {
		if b.Addr == addr {
			return b
		}
	}
	return routetable.BackendStatus{}
}

// getAll sends n GETs (and n OPTIONS, which take the net/http path) and
// returns the bodies of the 200 answers; any other answer fails the test.
func getAll(t *testing.T, e *edge, host string, n int) []string {
	t.Helper()
	var bodies []string
	for k := 0; k < n; k++ {
		for _, method := range []string{http.MethodGet, http.MethodOptions} {
			req, err := http.NewRequest(method, "http://"+e.srv.HTTPAddr()+"/", nil)
			require.NoError(t, err)
			req.Host = host
			resp, err := e.client.Do(req)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s #%d failed: %s", method, k, b)
			bodies = append(bodies, string(b))
		}
	}
	return bodies
}

// An instance that refuses, resets before any response byte or stalls its
// response head is ejected at its first failure, the request is retried on
// another instance (no client sees a failure), and the instance is
// readmitted once the bound passed.
func TestR21_FailingInstanceIsEjectedAndRequestsRetried(t *testing.T) {
	cases := map[string]struct {
		backend func(t *testing.T) string
		reason  string
	}{
		"refused":                 {func(t *testing.T) string { return freePort(t) }, "connect failed"},
		"reset before response":   {resetBackend, "reset before response"},
		"response header timeout": {stallBackend, "response header timeout"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := startEdge(t, ejectFor(time.Hour))
			a, b := addrOf(nameBackend(t, "a")), addrOf(nameBackend(t, "b"))
			bad := tc.backend(t)
			r := route("app.test", a, bad, b)
			r.ResponseHeaderTimeoutMS = 300
			e.publish(t, httpTable(1, r))

			bodies := getAll(t, e, "app.test", 12)
			st := ejection(e, bad)
			assert.Equal(t, tc.reason, st.EjectReason)
			assert.True(t, st.EjectedUntil.After(time.Now().Add(30*time.Minute)), "ejected for the bound: %+v", st)
			assert.Subset(t, []string{"a", "b"}, bodies)
			assert.Contains(t, bodies, "a")
			assert.Contains(t, bodies, "b")
		})
	}
}

// An ejected instance is readmitted when its ejection ends: once it
// answers again it gets its share of the requests.
func TestR21_EjectedInstanceIsReadmittedAfterTheBound(t *testing.T) {
	const bound = 300 * time.Millisecond
	e := startEdge(t, ejectFor(bound))
	a := addrOf(nameBackend(t, "a"))
	bad := freePort(t)
	e.publish(t, httpTable(1, route("app.test", a, bad)))
	getAll(t, e, "app.test", 2)
	st := ejection(e, bad)
	require.Equal(t, "connect failed", st.EjectReason)
	// The ejection's end as the edge reports it (truncated to the ms, so
	// never after the real one): a time taken here instead would be late
	// by however long getAll ran after the ejection under load.
	until := st.EjectedUntil

	// The instance comes back at its address.
	ln, err := net.Listen("tcp", bad)
	require.NoError(t, err)
	back := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "back")
	}))
	back.Listener = ln
	back.Start()
	t.Cleanup(back.Close)

	var readmitted time.Time
	require.Eventually(t, func() bool {
		bodies := getAll(t, e, "app.test", 2)
		readmitted = time.Now()
		return strings.Contains(strings.Join(bodies, ","), "back")
	}, 5*time.Second, 20*time.Millisecond, "never readmitted")
	assert.False(t, readmitted.Before(until), "readmitted only after the bound (ejected until %s)", until)
	assert.True(t, ejection(e, bad).EjectedUntil.IsZero())
}

// The last instance of a route not ejected is never ejected: a route of
// one failing instance answers its error page and stays routed to it, and
// of two failing instances only one is ejected.
func TestR21_LastInstanceIsNeverEjected(t *testing.T) {
	e := startEdge(t, ejectFor(time.Hour))
	one, x, y := freePort(t), freePort(t), freePort(t)
	e.publish(t, httpTable(1, route("one.test", one), route("two.test", x, y)))
	for range 3 {
		code, _ := e.get(t, "one.test", "/")
		assert.Equal(t, http.StatusServiceUnavailable, code)
	}
	assert.True(t, ejection(e, one).EjectedUntil.IsZero(), "the only instance is never ejected")
	for range 3 {
		code, _ := e.get(t, "two.test", "/")
		assert.Equal(t, http.StatusServiceUnavailable, code)
	}
	ex, ey := ejection(e, x), ejection(e, y)
	assert.True(t, ex.EjectedUntil.IsZero() != ey.EjectedUntil.IsZero(), "exactly one of two failing instances ejected: %+v %+v", ex, ey)
}

// A POST whose body was sent is not retried on another instance (it may
// have been processed): the client gets the error page; the instance is
// still ejected, so the next requests go to the healthy one.
func TestR21_PostWithBodyIsNotRetried(t *testing.T) {
	e := startEdge(t, ejectFor(time.Hour))
	var posts atomic.Int64
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		_, _ = io.WriteString(w, "a")
	}))
	t.Cleanup(a.Close)
	bad := resetBackend(t)
	// Round-robin: a fresh route's first request goes to its second
	// instance.
	e.publish(t, httpTable(1, route("app.test", addrOf(a), bad)))
	req, err := http.NewRequest(http.MethodPost, "http://"+e.srv.HTTPAddr()+"/", strings.NewReader("charge=1"))
	require.NoError(t, err)
	req.Host = "app.test"
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	assert.GreaterOrEqual(t, resp.StatusCode, 500, "not retried: the client sees the failure")
	assert.Equal(t, int64(0), posts.Load(), "the POST never reached the other instance")
	assert.Equal(t, "reset before response", ejection(e, bad).EjectReason)
	assert.True(t, ejection(e, addrOf(a)).EjectedUntil.IsZero(), "the healthy instance saw no failed retry")
	getAll(t, e, "app.test", 3)
}

// A TCP connect refused by one instance goes to the next one, and the
// instance is ejected.
func TestR21_TCPConnectFailureTriesNextInstanceAndEjects(t *testing.T) {
	e := startEdge(t, ejectFor(time.Hour))
	a, bad := echoTCP(t, "a"), freePort(t)
	listen := freePort(t)
	r := routetable.L4Route{Listen: listen, App: "app", Service: "db", Backend: a, Container: "c-a",
		Backends: []routetable.Backend{{Addr: a, Container: "c-a"}, {Addr: bad, Container: "c-bad"}}}
	e.publish(t, tcpTable(1, r))
	for range 4 {
		c, err := net.Dial("tcp", listen)
		require.NoError(t, err)
		assert.Equal(t, "a:x\n", roundTrip(t, c, bufio.NewReader(c), "x"))
		require.NoError(t, c.Close())
	}
	assert.Equal(t, "connect failed", ejection(e, bad).EjectReason)
}
