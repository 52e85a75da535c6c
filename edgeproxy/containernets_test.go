package edgeproxy_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// R73 and --trusted-proxies against container networks: here the test's
// own client address, 127.0.0.1, stands for an app container's (the
// container network is 127.0.0.0/24). A broad allow range (127.0.0.0/8)
// does not admit it, the container network named explicitly does; a
// broad trusted range does not make it a trusted proxy, so its
// X-Forwarded-For is not believed; maintenance --allow is narrowed the
// same way.
func TestR73_ContainerNetworksNeedExplicitAllowAndAreNeverTrustedProxies(t *testing.T) {
	be := nameBackend(t, "app")
	withAllow := func(host string, allow ...string) routetable.HTTPRoute {
		r := route(host, addrOf(be))
		r.Allow = allow
		return r
	}
	maint := route("maint.test", addrOf(be))
	maint.Maintenance = &routetable.Maintenance{Allow: []string{"127.0.0.0/8"}}
	table := httpTable(1,
		withAllow("broad.test", "127.0.0.0/8"),
		withAllow("named.test", "127.0.0.0/24"),
		withAllow("office.test", "203.0.113.0/24"),
		maint)
	containers := func() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/24")} }
	e := startEdge(t, func(c *edgeproxy.Config) {
		c.ContainerNets = containers
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	e.publish(t, table)

	code, _ := e.get(t, "broad.test", "/")
	assert.Equal(t, http.StatusForbidden, code, "a broad allow range does not admit a container")
	code, _ = e.get(t, "named.test", "/")
	assert.Equal(t, http.StatusOK, code, "the container network named explicitly admits it")
	code, _ = e.get(t, "office.test", "/", "X-Forwarded-For", "203.0.113.7")
	assert.Equal(t, http.StatusForbidden, code, "a container cannot forge X-Forwarded-For under a broad trusted range")
	code, _ = e.get(t, "maint.test", "/")
	assert.Equal(t, http.StatusServiceUnavailable, code, "maintenance --allow is narrowed too")

	// Without container networks, the same table behaves as before.
	plain := startEdge(t, func(c *edgeproxy.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	plain.publish(t, table)
	code, _ = plain.get(t, "broad.test", "/")
	assert.Equal(t, http.StatusOK, code)
	code, _ = plain.get(t, "office.test", "/", "X-Forwarded-For", "203.0.113.7")
	assert.Equal(t, http.StatusOK, code)
}
