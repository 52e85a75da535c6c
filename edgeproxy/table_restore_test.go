package edgeproxy_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// A restart with routes.json missing serves the last applied table
// (applied.json) and reports it in status.json, until a table is
// published again.
func TestRestartWithRoutesMissingServesAppliedTableAndReports(t *testing.T) {
	be := nameBackend(t, "last-good")
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "edge"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "edge", edgeproxy.AppliedFile),
		mustJSON(t, httpTable(7, route("app.test", addrOf(be)))), 0o600))
	e := startEdge(t, func(c *edgeproxy.Config) { c.StateDir = dir })

	code, body := e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "last-good", body)
	st := e.readStatus(t)
	assert.Equal(t, uint64(7), st.AppliedGeneration)
	assert.Contains(t, st.Error, "routes.json is missing at start")
	assert.Contains(t, st.Error, "generation 7")

	e.publish(t, httpTable(8, route("app.test", addrOf(nameBackend(t, "new")))))
	e.waitStatus(t, func(st routetable.Status) bool { return st.AppliedGeneration == 8 && st.Error == "" })
	_, body = e.get(t, "app.test", "/")
	assert.Equal(t, "new", body)
}
