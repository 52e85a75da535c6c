package compose

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// R73 (compose): a router's Traefik basicauth.users and ipallowlist /
// ipwhitelist sourcerange middlewares (defined on this service or
// another, "@docker" or bare) become the HTTP interface's basic_auth and
// allow; $$ in the label is the hash's $; other hosts of the service and
// routers without middlewares stay open.
func TestR73_ComposeMapsTraefikAuthMiddlewares(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	require.NoError(t, err)
	escaped := strings.ReplaceAll(string(h), "$", "$$")
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: web:1
    expose: ["8080"]
    labels:
      traefik.http.routers.admin.rule: Host(` + "`admin.example.com`" + `)
      traefik.http.routers.admin.middlewares: auth@docker, office
      traefik.http.routers.shop.rule: Host(` + "`shop.example.com`" + `)
      traefik.http.middlewares.auth.basicauth.users: "alice:` + escaped + `,bob:` + escaped + `"
      traefik.http.middlewares.auth.basicauth.removeheader: "true"
  api:
    image: api:1
    expose: ["9000"]
    labels:
      traefik.http.routers.api.rule: Host(` + "`api.example.com`" + `)
      traefik.http.routers.api.middlewares: office
      traefik.http.middlewares.office.ipwhitelist.sourcerange: "10.0.0.0/8, 192.0.2.7"
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	web := svcOf(t, res.Spec, "web").HTTP
	require.Len(t, web, 2)
	assert.Equal(t, "admin.example.com", web[0].Host)
	assert.Equal(t, []string{"alice:" + string(h), "bob:" + string(h)}, web[0].BasicAuth)
	assert.Equal(t, []string{"10.0.0.0/8", "192.0.2.7/32"}, web[0].Allow, "a middleware of another service")
	assert.Equal(t, "shop.example.com", web[1].Host)
	assert.Empty(t, web[1].BasicAuth)
	assert.Empty(t, web[1].Allow)
	api := svcOf(t, res.Spec, "api").HTTP
	require.Len(t, api, 1)
	assert.Equal(t, []string{"10.0.0.0/8", "192.0.2.7/32"}, api[0].Allow)
	assert.Contains(t, string(res.Manifest), "basic_auth = [")
}

// R73 (compose): what the edge cannot honour is refused at the router's
// middlewares label, saying why: other middleware kinds or options,
// another provider, an undefined middleware, a basicauth entry that is not
// bcrypt (with the $$ hint, without the entry), two basic-auth
// middlewares on one router.
func TestR73_ComposeRefusesOtherMiddlewares(t *testing.T) {
	head := "services:\n  web:\n    image: web:1\n    expose: [80]\n    labels:\n      traefik.http.routers.w.rule: Host(`a.example.com`)\n"
	for _, c := range []struct{ name, labels, want string }{
		{"headers", "      traefik.http.routers.w.middlewares: h\n      traefik.http.middlewares.h.headers.customrequestheaders.X-A: b\n", "option headers.customrequestheaders.X-A cannot be honoured"},
		{"ipstrategy", "      traefik.http.routers.w.middlewares: o\n      traefik.http.middlewares.o.ipallowlist.sourcerange: 10.0.0.0/8\n      traefik.http.middlewares.o.ipallowlist.ipstrategy.depth: \"1\"\n", "option ipallowlist.ipstrategy.depth cannot be honoured"},
		{"file provider", "      traefik.http.routers.w.middlewares: auth@file\n", "defined by the file provider"},
		{"undefined", "      traefik.http.routers.w.middlewares: auth\n", "not defined by any service's labels"},
		{"md5", "      traefik.http.routers.w.middlewares: a\n      traefik.http.middlewares.a.basicauth.users: \"alice:$$apr1$$x$$y\"\n", "MD5 (apr1) hashes are refused, only bcrypt; make one with: htpasswd -nbB USER PASSWORD (in a compose file, write each $ of the hash as $$)"},
		{"plain", "      traefik.http.routers.w.middlewares: a\n      traefik.http.middlewares.a.basicauth.users: \"alice:hunter2\"\n", "not a bcrypt hash"},
	} {
		p := refusal(t, head+c.labels, "services.web.labels.traefik.http.routers.w.middlewares")
		assert.Contains(t, p.Message, c.want, c.name)
		assert.NotContains(t, p.Message, "hunter2", c.name)
	}
}
