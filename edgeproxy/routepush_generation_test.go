package edgeproxy_test

import (
	"math"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// R79 (generations): a pushed table more than 2^32 above the applied
// generation is refused (422) and changes nothing, valid or not, so a
// push at 2^64-1 cannot hold every later table off: the edge keeps
// serving, and the next table in sequence applies.
func TestRoutePush_FarAheadGenerationIsRefusedAndRoutingRecovers(t *testing.T) {
	e := startEdge(t, withToken)
	one, evil, two := nameBackend(t, "one"), nameBackend(t, "evil"), nameBackend(t, "two")

	code, _ := putRoutes(t, e, httpTable(1, route("app.test", addrOf(one))))
	require.Equal(t, http.StatusOK, code)

	for _, gen := range []uint64{math.MaxUint64, 1 + routetable.MaxGenerationStep + 1} {
		code, body := adminDo(t, e, http.MethodPut, "/routes", "Bearer "+pushToken, mustJSON(t, httpTable(gen, route("app.test", addrOf(evil)))))
		assert.Equal(t, http.StatusUnprocessableEntity, code, "generation %d: %s", gen, body)
		assert.Contains(t, string(body), "above the applied generation 1")
	}
	bad := httpTable(math.MaxUint64, route("app.test", addrOf(evil)))
	bad.Schema = 99 // a table the edge would reject
	code, _ = putRoutes(t, e, bad)
	assert.Equal(t, http.StatusUnprocessableEntity, code)

	st := e.srv.Status()
	assert.Equal(t, uint64(1), st.AppliedGeneration)
	assert.Zero(t, st.RejectedGeneration, "a refused generation is not recorded as rejected")
	assert.Equal(t, uint64(1), e.routesOnDisk(t).Generation, "nothing written")
	got, body := e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusOK, got)
	assert.Equal(t, "one", body)

	code, st = putRoutes(t, e, httpTable(2, route("app.test", addrOf(two))))
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, uint64(2), st.AppliedGeneration)
	got, body = e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusOK, got)
	assert.Equal(t, "two", body)

	// A fresh edge (nothing applied) refuses it too.
	fresh := startEdge(t, withToken)
	code, _ = putRoutes(t, fresh, httpTable(math.MaxUint64, route("app.test", addrOf(evil))))
	assert.Equal(t, http.StatusUnprocessableEntity, code)

	// Exactly 2^32 above is still taken.
	code, st = putRoutes(t, e, httpTable(2+routetable.MaxGenerationStep, route("app.test", addrOf(one))))
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, 2+routetable.MaxGenerationStep, st.AppliedGeneration)
}
