package edgeproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

const pushToken = "s3cret-routes-token"

// withToken configures the routes token; the poll is an hour, so only the
// push itself can apply a table within a test.
func withToken(c *edgeproxy.Config) {
	c.RoutesToken = pushToken
	c.PollInterval = time.Hour
}

// adminDo sends method path to e's admin address with "Authorization:
// auth" (none when ""), and returns the status code and body.
func adminDo(t *testing.T, e *edge, method, path, auth string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+e.srv.AdminAddr()+path, bytes.NewReader(body))
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// putRoutes is PUT /routes of table with the right token; it returns the
// status code and the decoded status (zero when the body is none).
func putRoutes(t *testing.T, e *edge, table any) (int, routetable.Status) {
	t.Helper()
	code, body := adminDo(t, e, http.MethodPut, "/routes", "Bearer "+pushToken, mustJSON(t, table))
	var st routetable.Status
	if code == http.StatusOK || code == http.StatusConflict {
		require.NoError(t, json.Unmarshal(body, &st), string(body))
	}
	return code, st
}

func (e *edge) routesOnDisk(t *testing.T) routetable.Table {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.stateDir, "edge", edgeproxy.RoutesFile))
	require.NoError(t, err)
	var table routetable.Table
	require.NoError(t, json.Unmarshal(data, &table))
	return table
}

// Route push: PUT /routes applies the table before it answers, with the
// status after the apply (the generation, or the rejection of a table the
// edge refuses), and writes it as the edge's own routes.json.
func TestRoutePush_PutAppliesAtOnceAndAnswersWithTheGeneration(t *testing.T) {
	e := startEdge(t, withToken)
	backend := nameBackend(t, "pushed")

	code, st := putRoutes(t, e, httpTable(3, route("push.test", addrOf(backend))))
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, uint64(3), st.AppliedGeneration)
	assert.Empty(t, st.Error)
	got, body := e.get(t, "push.test", "/")
	assert.Equal(t, http.StatusOK, got)
	assert.Equal(t, "pushed", body)
	assert.Equal(t, uint64(3), e.routesOnDisk(t).Generation)

	// A table the edge refuses: 200 with the rejection; the last good one
	// keeps serving.
	code, st = putRoutes(t, e, json.RawMessage(`{"schema": 1, "generation": 4, "http": [{"host": "bad host"}]}`))
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, uint64(3), st.AppliedGeneration)
	assert.Equal(t, uint64(4), st.RejectedGeneration)
	assert.Contains(t, st.Error, "bad host")
	got, _ = e.get(t, "push.test", "/")
	assert.Equal(t, http.StatusOK, got)

	// Not a route table at all: 400, nothing written.
	code, _ = adminDo(t, e, http.MethodPut, "/routes", "Bearer "+pushToken, []byte(`[1,2]`))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, uint64(4), e.routesOnDisk(t).Generation)
}

// Route push: an edge never goes back: a lower generation is 409 with the
// status and changes nothing; the same generation again is 200 and
// writes nothing.
func TestRoutePush_LowerGenerationIsRefusedAndChangesNothing(t *testing.T) {
	e := startEdge(t, withToken)
	newer, older := nameBackend(t, "newer"), nameBackend(t, "older")
	code, _ := putRoutes(t, e, httpTable(5, route("gen.test", addrOf(newer))))
	require.Equal(t, http.StatusOK, code)

	code, st := putRoutes(t, e, httpTable(4, route("gen.test", addrOf(older))))
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, uint64(5), st.AppliedGeneration)
	assert.Equal(t, uint64(5), e.routesOnDisk(t).Generation)

	code, st = putRoutes(t, e, httpTable(5, route("gen.test", addrOf(older))))
	assert.Equal(t, http.StatusOK, code, "the same generation is idempotent")
	assert.Equal(t, uint64(5), st.AppliedGeneration)
	_, body := e.get(t, "gen.test", "/")
	assert.Equal(t, "newer", body)
	assert.Equal(t, addrOf(newer), e.routesOnDisk(t).HTTP[0].Backends[0].Addr)
}

// Route push: without the token (missing, wrong, another scheme) both
// endpoints answer 401 and nothing is written.
func TestRoutePush_WrongOrMissingTokenIs401AndChangesNothing(t *testing.T) {
	e := startEdge(t, withToken)
	table := mustJSON(t, httpTable(1, route("x.test", "127.0.0.1:1")))
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + pushToken + "x", "Basic " + pushToken, pushToken} {
		code, _ := adminDo(t, e, http.MethodPut, "/routes", auth, table)
		assert.Equal(t, http.StatusUnauthorized, code, "PUT with %q", auth)
		code, _ = adminDo(t, e, http.MethodGet, "/routes", auth, nil)
		assert.Equal(t, http.StatusUnauthorized, code, "GET with %q", auth)
	}
	_, err := os.Stat(filepath.Join(e.stateDir, "edge", edgeproxy.RoutesFile))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Equal(t, uint64(0), e.srv.Status().AppliedGeneration)
}

// Route push: an edge without a routes token serves neither endpoint.
func TestRoutePush_WithoutTokenTheEndpointsDoNotExist(t *testing.T) {
	e := startEdge(t)
	code, _ := adminDo(t, e, http.MethodPut, "/routes", "Bearer "+pushToken, mustJSON(t, httpTable(1)))
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = adminDo(t, e, http.MethodGet, "/routes", "Bearer "+pushToken, nil)
	assert.Equal(t, http.StatusNotFound, code)
	_, err := os.Stat(filepath.Join(e.stateDir, "edge", edgeproxy.RoutesFile))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// Route push: GET /routes serves the applied table, whichever way it came
// (here a publisher's routes.json); ?after=N is 204 until a newer one.
func TestRoutePush_GetServesTheAppliedTableAndAfterIs204UntilNewer(t *testing.T) {
	e := startEdge(t, func(c *edgeproxy.Config) { c.RoutesToken = pushToken })
	auth := "Bearer " + pushToken
	code, _ := adminDo(t, e, http.MethodGet, "/routes", auth, nil)
	assert.Equal(t, http.StatusNotFound, code, "no table applied yet")
	code, _ = adminDo(t, e, http.MethodGet, "/routes?after=0", auth, nil)
	assert.Equal(t, http.StatusNotFound, code)

	e.publish(t, httpTable(2, route("file.test", "127.0.0.1:1")))
	code, body := adminDo(t, e, http.MethodGet, "/routes", auth, nil)
	require.Equal(t, http.StatusOK, code)
	var table routetable.Table
	require.NoError(t, json.Unmarshal(body, &table))
	assert.Equal(t, uint64(2), table.Generation)
	assert.Equal(t, "file.test", table.HTTP[0].Host)

	code, _ = adminDo(t, e, http.MethodGet, "/routes?after=1", auth, nil)
	assert.Equal(t, http.StatusOK, code)
	code, body = adminDo(t, e, http.MethodGet, "/routes?after=2", auth, nil)
	assert.Equal(t, http.StatusNoContent, code)
	assert.Empty(t, body)
	code, _ = adminDo(t, e, http.MethodGet, "/routes?after=9", auth, nil)
	assert.Equal(t, http.StatusNoContent, code)
	code, _ = adminDo(t, e, http.MethodGet, "/routes?after=-1", auth, nil)
	assert.Equal(t, http.StatusBadRequest, code)
}

// Route push: a PUT body over 16 MiB is 413 and changes nothing.
func TestRoutePush_BodyOver16MiBIs413(t *testing.T) {
	e := startEdge(t, withToken)
	big := append([]byte(`{"schema":1,"generation":1,"pad":"`), bytes.Repeat([]byte("x"), 16<<20)...)
	code, _ := adminDo(t, e, http.MethodPut, "/routes", "Bearer "+pushToken, append(big, `"}`...))
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Equal(t, uint64(0), e.srv.Status().AppliedGeneration)
}

// Route push: the pushed table is the edge's routes.json, so an edge that
// restarts on the same state directory serves it.
func TestRoutePush_PushedTableSurvivesARestart(t *testing.T) {
	first := startEdge(t, withToken)
	backend := nameBackend(t, "kept")
	code, _ := putRoutes(t, first, httpTable(6, route("kept.test", addrOf(backend))))
	require.Equal(t, http.StatusOK, code)
	first.stop()

	second := startEdge(t, withToken, func(c *edgeproxy.Config) { c.StateDir = first.stateDir })
	assert.Equal(t, uint64(6), second.srv.Status().AppliedGeneration)
	got, body := second.get(t, "kept.test", "/")
	assert.Equal(t, http.StatusOK, got)
	assert.Equal(t, "kept", body)
	code, _ = adminDo(t, second, http.MethodGet, "/routes?after=5", "Bearer "+pushToken, nil)
	assert.Equal(t, http.StatusOK, code)
}

// Route push: an edge learns a newer table from its peers (--peers): the
// one a table was pushed to answers GET /routes?after=N, the other adopts
// it as a PUT would (routes.json written), also after a restart that
// missed the push. Lookup hands out both edges' admin addresses; each
// skips its own.
func TestRoutePush_EdgeLearnsTheTableFromAPeer(t *testing.T) {
	adminA, adminB := freePort(t), freePort(t)
	lookup := func(context.Context, string) ([]string, error) { return []string{adminA, adminB}, nil }
	peer := func(admin string) func(*edgeproxy.Config) {
		return func(c *edgeproxy.Config) {
			withToken(c)
			c.AdminAddr, c.Peers, c.PeerLookup = admin, "tasks.gordon-edge", lookup
			c.PeerInterval = 20 * time.Millisecond
			c.NoHandover = true
		}
	}
	a, b := startEdge(t, peer(adminA)), startEdge(t, peer(adminB))
	backend := nameBackend(t, "peer")

	code, _ := putRoutes(t, a, httpTable(4, route("peer.test", addrOf(backend))))
	require.Equal(t, http.StatusOK, code)
	require.Eventually(t, func() bool { return b.srv.Status().AppliedGeneration == 4 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, uint64(4), b.routesOnDisk(t).Generation)
	got, body := b.get(t, "peer.test", "/")
	assert.Equal(t, http.StatusOK, got)
	assert.Equal(t, "peer", body)

	// B restarts and misses a push to A; it catches up from A.
	b.stop()
	code, _ = putRoutes(t, a, httpTable(5, route("peer.test", addrOf(backend))))
	require.Equal(t, http.StatusOK, code)
	b2 := startEdge(t, peer(adminB), func(c *edgeproxy.Config) { c.StateDir = b.stateDir })
	require.Eventually(t, func() bool { return b2.srv.Status().AppliedGeneration == 5 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, uint64(5), b2.routesOnDisk(t).Generation)
	// A never goes back to what B had.
	assert.Equal(t, uint64(5), a.srv.Status().AppliedGeneration)
}

// Route push: without a routes token the admin address must be loopback
// and --peers is refused; with one, any address may be bound.
func TestRoutePush_NonLoopbackAdminAndPeersNeedTheToken(t *testing.T) {
	run := func(cfg edgeproxy.Config) error {
		cfg.StateDir, cfg.HTTPAddr, cfg.NoHandover = t.TempDir(), "127.0.0.1:0", true
		srv := edgeproxy.New(cfg)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		select {
		case err := <-done:
			cancel()
			return err
		case <-srv.Ready():
			cancel()
			return <-done
		}
	}
	err := run(edgeproxy.Config{AdminAddr: "0.0.0.0:0"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--routes-token-file")
	err = run(edgeproxy.Config{Peers: "tasks.gordon-edge"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--routes-token-file")
	assert.NoError(t, run(edgeproxy.Config{AdminAddr: "0.0.0.0:0", RoutesToken: pushToken}))
	assert.NoError(t, run(edgeproxy.Config{AdminAddr: "localhost:0"}))
}
