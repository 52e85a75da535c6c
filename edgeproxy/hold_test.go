package edgeproxy_test

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

func heldRoute(host string, until time.Time, queue int) routetable.HTTPRoute {
	return routetable.HTTPRoute{Host: host, App: "app", Service: "web", Hold: &routetable.Hold{Until: until, Queue: queue}}
}

type getResult struct {
	code       int
	body       string
	retryAfter string
	err        error
	took       time.Duration
}

// getAsync sends GET / for host with client c (a fresh connection per
// request when c has keep-alives off) and delivers the result on the
// returned channel.
func getAsync(addr, host string, c *http.Client) <-chan getResult {
	ch := make(chan getResult, 1)
	go func() {
		t0 := time.Now()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			ch <- getResult{err: err, took: time.Since(t0)}
			return
		}
		defer resp.Body.Close()
		buf := make([]byte, 256)
		n, _ := resp.Body.Read(buf)
		ch <- getResult{code: resp.StatusCode, body: string(buf[:n]), retryAfter: resp.Header.Get("Retry-After"), took: time.Since(t0)}
	}()
	return ch
}

// R58 (held, not refused): while a service is between generations its
// route is held: requests for its host (keep-alive ones served by the
// event loop and new connections alike) wait instead of getting 404, and
// all go to the new generation once a table routes it.
func TestR58_HeldRequestsGoToTheNextGeneration(t *testing.T) {
	e := startEdge(t)
	a, b := nameBackend(t, "a"), nameBackend(t, "b")
	e.publish(t, httpTable(1, route("app.test", addrOf(a))))
	keep := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	// Warm the keep-alive connections: their next request reaches the
	// event loop on an established connection.
	var warm []<-chan getResult
	for range 8 {
		warm = append(warm, getAsync(e.srv.HTTPAddr(), "app.test", keep))
	}
	for _, ch := range warm {
		r := <-ch
		require.NoError(t, r.err)
		require.Equal(t, "a", r.body)
	}

	e.publish(t, httpTable(2, heldRoute("app.test", time.Now().Add(10*time.Second), 0)))
	var held []<-chan getResult
	for i := range 16 {
		c := keep
		if i%2 == 1 {
			c = fresh
		}
		held = append(held, getAsync(e.srv.HTTPAddr(), "app.test", c))
	}
	awaitHeld(t, e, 16)
	for _, ch := range held {
		select {
		case r := <-ch:
			t.Fatalf("a held request was answered: %+v", r)
		default:
		}
	}
	// An unknown host is still 404 at once.
	code, _ := e.get(t, "other.test", "/")
	assert.Equal(t, http.StatusNotFound, code)

	e.publish(t, httpTable(3, route("app.test", addrOf(b))))
	for _, ch := range held {
		r := <-ch
		require.NoError(t, r.err)
		assert.Equal(t, http.StatusOK, r.code)
		assert.Equal(t, "b", r.body, "released to the new generation")
	}
	awaitHeld(t, e, 0)
}

// R58: a hold whose bound passes answers 503 with Retry-After; a hold that
// ends without a new generation (the route is gone: the replacement
// failed) answers 503 too, not 404; a stopped route answers 503 at once; a
// full hold queue answers 503 at once.
func TestR58_HoldEndsIn503WithRetryAfter(t *testing.T) {
	e := startEdge(t)
	c := &http.Client{Timeout: 10 * time.Second}

	bound := time.Now().Add(400 * time.Millisecond)
	e.publish(t, httpTable(1, heldRoute("app.test", bound, 0)))
	r := <-getAsync(e.srv.HTTPAddr(), "app.test", c)
	answered := time.Now()
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.code)
	assert.Equal(t, "5", r.retryAfter)
	assert.Contains(t, r.body, "hold bound passed")
	// The bound is absolute: on a loaded machine the publish and the
	// request may start late, so what counts is when the answer came.
	assert.False(t, answered.Before(bound), "held until the bound (answered %s before it)", bound.Sub(answered))

	e.publish(t, httpTable(2, heldRoute("app.test", time.Now().Add(10*time.Second), 2)))
	first, second := getAsync(e.srv.HTTPAddr(), "app.test", c), getAsync(e.srv.HTTPAddr(), "app.test", c)
	awaitHeld(t, e, 2)
	r = <-getAsync(e.srv.HTTPAddr(), "app.test", c)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.code, "the third request overflows a queue of 2")
	assert.Contains(t, r.body, "queue is full")

	// The replacement fails: the next table has no route for the host.
	e.publish(t, httpTable(3))
	for _, ch := range []<-chan getResult{first, second} {
		r := <-ch
		require.NoError(t, r.err)
		assert.Equal(t, http.StatusServiceUnavailable, r.code)
		assert.Equal(t, "5", r.retryAfter)
		assert.Contains(t, r.body, "replacement did not complete")
	}
	code, _ := e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusNotFound, code, "a new request for a host without route is 404")

	e.publish(t, httpTable(4, routetable.HTTPRoute{Host: "app.test", App: "app", Service: "web", Stopped: true}))
	r = <-getAsync(e.srv.HTTPAddr(), "app.test", c)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.code)
	assert.Equal(t, "5", r.retryAfter)
	assert.Contains(t, r.body, "is stopped")

	// R41: a running app's service with no ready instance answers 503
	// with Retry-After, on the event loop's path as on the others.
	e.publish(t, httpTable(5, routetable.HTTPRoute{Host: "app.test", App: "app", Service: "web", Unavailable: true}))
	r = <-getAsync(e.srv.HTTPAddr(), "app.test", c)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.code)
	assert.Equal(t, "5", r.retryAfter)
	assert.Contains(t, r.body, "app app service web has no ready instance")
}

// A table whose route is unavailable and also held, stopped or given
// backends is refused whole (the edge keeps its last table).
func TestUnavailableRouteIsExclusive(t *testing.T) {
	base := routetable.HTTPRoute{Host: "app.test", App: "app", Service: "web", Unavailable: true}
	held, stopped, backed := base, base, base
	held.Hold = &routetable.Hold{Until: time.Now().Add(time.Minute)}
	stopped.Stopped = true
	backed.Backends = []routetable.Backend{{Addr: "127.0.0.1:9"}}
	for name, r := range map[string]routetable.HTTPRoute{"held": held, "stopped": stopped, "with backends": backed} {
		tbl := httpTable(1, r)
		err := edgeproxy.ValidateTable(&tbl)
		require.ErrorIs(t, err, edgeproxy.ErrInvalidTable, name)
	}
	tbl := httpTable(1, base)
	require.NoError(t, edgeproxy.ValidateTable(&tbl))
}

// R58: a new TCP connection to a held published port is accepted and held,
// then spliced to the new generation's backend once a table gives the
// listen one; a connection opened before the hold keeps its backend.
func TestR58_HeldTCPConnectionSplicedToNextBackend(t *testing.T) {
	e := startEdge(t)
	listen := freePort(t)
	one, two := echoTCP(t, "one"), echoTCP(t, "two")
	e.publish(t, tcpTable(1, tcpRoute(listen, one)))

	e.publish(t, tcpTable(2, routetable.L4Route{Listen: listen, App: "app", Service: "db", Hold: &routetable.Hold{Until: time.Now().Add(10 * time.Second)}}))
	var wg sync.WaitGroup
	replies := make([]string, 4)
	for i := range replies {
		c, err := net.Dial("tcp", listen)
		require.NoError(t, err, "the held port accepts")
		defer c.Close()
		_, err = c.Write([]byte("hello\n"))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			replies[i], _ = bufio.NewReader(c).ReadString('\n')
		}()
	}
	// The connections are accepted and held by now: the edge counts held
	// TCP connections only inside its relay, so this is a settle, not a
	// wait for an event it reports.
	time.Sleep(200 * time.Millisecond)
	e.publish(t, tcpTable(3, tcpRoute(listen, two)))
	wg.Wait()
	for _, r := range replies {
		assert.Equal(t, "two:hello\n", r, "spliced to the new backend with what was sent while held")
	}

	// A hold that passes its bound closes the held connection.
	e.publish(t, tcpTable(4, routetable.L4Route{Listen: listen, App: "app", Service: "db", Hold: &routetable.Hold{Until: time.Now().Add(300 * time.Millisecond)}}))
	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = c.Read(make([]byte, 1))
	assert.Error(t, err, "closed at the bound")
}

// awaitHeld waits (10 s at most) until the edge holds n HTTP requests.
func awaitHeld(t *testing.T, e *edge, n float64) {
	t.Helper()
	require.Eventually(t, func() bool { return testutil.ToFloat64(e.srv.Metrics.Held) == n }, 10*time.Second, 5*time.Millisecond,
		"%v requests held", n)
}
