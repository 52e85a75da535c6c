package edgeproxy_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// postReload is admin POST /reload; it returns the status code and the
// decoded body (zero unless 200).
func postReload(t *testing.T, e *edge) (int, routetable.Status) {
	t.Helper()
	resp, err := e.client.Post("http://"+e.srv.AdminAddr()+"/reload", "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st routetable.Status
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	}
	return resp.StatusCode, st
}

// Decision 11: POST /reload reads the route table at once and answers with
// the outcome, the applied generation (or the rejection), so a publisher
// need not poll status.json for it; the edge's own poll plays no part.
func TestDecision11_ReloadAnswersWithTheAppliedGenerationOrTheRejection(t *testing.T) {
	e := startEdge(t, func(c *edgeproxy.Config) { c.PollInterval = time.Hour })
	backend := nameBackend(t, "one")

	e.writeRoutes(t, mustJSON(t, httpTable(7, route("reload.test", addrOf(backend)))))
	code, st := postReload(t, e)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, uint64(7), st.AppliedGeneration)
	assert.Empty(t, st.Error)
	assert.Equal(t, edgestate.StateDirID(e.stateDir), st.StateID, "the answer says which state directory the edge serves")
	got, body := e.get(t, "reload.test", "/")
	assert.Equal(t, 200, got, body)

	// A table the edge refuses: the answer names the generation and why;
	// the last good table keeps serving.
	e.writeRoutes(t, []byte(`{"schema": 1, "generation": 8, "http": [{"host": "", "backends": []}]}`))
	code, st = postReload(t, e)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, uint64(7), st.AppliedGeneration)
	assert.Equal(t, uint64(8), st.RejectedGeneration)
	assert.NotEmpty(t, st.Error)
	got, _ = e.get(t, "reload.test", "/")
	assert.Equal(t, 200, got)
}
