package edgeproxy_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// peered is an edge of a swarm (Peers set) whose peers have no table to
// give, waiting at most wait for its first one.
func peered(wait time.Duration) func(*edgeproxy.Config) {
	return func(c *edgeproxy.Config) {
		withToken(c)
		c.Peers = "tasks.gordon-edge"
		c.PeerLookup = func(context.Context, string) ([]string, error) { return nil, nil }
		c.FirstTableWait = wait
		c.NoHandover = true
	}
}

// A new edge task of a swarm serves its port before its first table
// comes (from its peers or a push): a request for a routed host that
// arrives meanwhile waits for the table and is answered by the app, not
// with a 404.
func TestFirstTable_ARequestBeforeThePeeredEdgesFirstTableWaitsForIt(t *testing.T) {
	e := startEdge(t, peered(10*time.Second))
	backend := nameBackend(t, "app")
	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		code, body, err := e.tryGet("app.test", "/")
		got <- answer{code, body, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("answered before any table: %d %q %v", a.code, a.body, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	code, _ := putRoutes(t, e, httpTable(1, route("app.test", addrOf(backend))))
	require.Equal(t, http.StatusOK, code, "the push")
	a := awaitSignal(t, got, "the held request's answer")
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusOK, a.code)
	assert.Equal(t, "app", a.body)

	// With a table, an unknown host is a 404 at once.
	t0 := time.Now()
	code, body := e.get(t, "nope.test", "/")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "no route for host nope.test")
	assert.Less(t, time.Since(t0), time.Second, "no wait once a table is applied")
}

// The wait is bounded: no table by FirstTableWait after start, and the
// request is answered 404 as without one.
func TestFirstTable_TheWaitEndsAtFirstTableWait(t *testing.T) {
	e := startEdge(t, peered(400*time.Millisecond))
	t0 := time.Now()
	code, body := e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "no route for host app.test")
	assert.Less(t, time.Since(t0), 2*time.Second)
	// Later requests do not wait at all.
	t1 := time.Now()
	code, _ = e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Less(t, time.Since(t1), 200*time.Millisecond)
}

// Without peers (one engine) nothing waits: the table on disk is the
// edge's, and an unknown host is a 404 at once.
func TestFirstTable_WithoutPeersNothingWaits(t *testing.T) {
	e := startEdge(t)
	t0 := time.Now()
	code, _ := e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Less(t, time.Since(t0), 500*time.Millisecond)
}
