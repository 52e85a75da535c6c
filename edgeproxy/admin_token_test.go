package edgeproxy_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// The admin API's token: with Config.AdminToken, every admin request but
// GET /healthz needs "Bearer <token>", even on loopback (any local user
// reaches a loopback port): /status (backend addresses), /metrics, POST
// /reload and /debug/pprof/ are 401 without it or with a wrong one.
func TestAdmin_EveryEndpointButHealthzNeedsTheTokenEvenOnLoopback(t *testing.T) {
	e := startEdge(t, func(c *edgeproxy.Config) {
		c.AdminToken = "admin-tok"
		c.Pprof = true
	})
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/status"},
		{http.MethodGet, "/metrics"},
		{http.MethodPost, "/reload"},
		{http.MethodGet, "/debug/pprof/"},
		{http.MethodGet, "/debug/pprof/symbol"},
	} {
		for _, auth := range []string{"", "Bearer wrong", "admin-tok", "Basic admin-tok"} {
			code, _ := adminDo(t, e, req.method, req.path, auth, nil)
			assert.Equal(t, http.StatusUnauthorized, code, "%s %s with %q", req.method, req.path, auth)
		}
		code, body := adminDo(t, e, req.method, req.path, "Bearer admin-tok", nil)
		assert.Equal(t, http.StatusOK, code, "%s %s with the token: %s", req.method, req.path, body)
	}
	code, body := adminDo(t, e, http.MethodGet, "/healthz", "", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", string(body))
}

// With a routes token too (a swarm edge), the routes token opens the
// admin endpoints, and the admin token never opens /routes.
func TestAdmin_RoutesTokenOpensAdminButAdminTokenNeverPushesRoutes(t *testing.T) {
	e := startEdge(t, withToken, func(c *edgeproxy.Config) { c.AdminToken = "admin-tok" })
	code, _ := adminDo(t, e, http.MethodGet, "/status", "Bearer "+pushToken, nil)
	assert.Equal(t, http.StatusOK, code)
	code, _ = adminDo(t, e, http.MethodGet, "/status", "", nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = adminDo(t, e, http.MethodPut, "/routes", "Bearer admin-tok", mustJSON(t, httpTable(1)))
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = adminDo(t, e, http.MethodGet, "/routes", "Bearer admin-tok", nil)
	assert.Equal(t, http.StatusUnauthorized, code)
}
