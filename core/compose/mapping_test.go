package compose

import (
	"context"
	"github.com/gordon-deploy/docker-gordon/core/manifest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func svcOf(t *testing.T, spec core.AppSpec, name string) *core.ServiceSpec {
	t.Helper()
	s, ok := spec.Service(name)
	require.True(t, ok, "service %s missing", name)
	return s
}

func TestCompose_PortsBecomeL4Interfaces(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: game
services:
  srv:
    image: srv:1
    ports:
      - "5432:5432"
      - "127.0.0.1:9000:9001"
      - "28015:28015/udp"
      - "[::1]:7000:7000"
      - "8000-8001:8000-8001"
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	s := svcOf(t, res.Spec, "srv")
	assert.Equal(t, []core.L4Interface{
		{Port: 5432, Publish: "0.0.0.0:5432"}, {Port: 9001, Publish: "127.0.0.1:9000"},
		{Port: 7000, Publish: "[::1]:7000"}, {Port: 8000, Publish: "0.0.0.0:8000"}, {Port: 8001, Publish: "0.0.0.0:8001"},
	}, s.TCP)
	assert.Equal(t, []core.L4Interface{{Port: 28015, Publish: "0.0.0.0:28015"}}, s.UDP)
	assert.Empty(t, s.HTTP)
	assert.False(t, s.OverlapEligible(), "a UDP interface forces the sequential flow")
	assert.Equal(t, []string{"srv: port 8000 is relayed as raw TCP on 0.0.0.0:8000; to route it by host through the edge's HTTP, set x-gordon.host"}, res.Notes,
		"an HTTP-looking port without a host is noted, a database port is not")
}

func TestCompose_RoutedPortBecomesHTTP(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: web:1
    ports: ["8080:8080", "9090:9090"]
    x-gordon: { host: shop.example.com, port: 8080, readiness: { type: http, path: /healthz, port: 8080 } }
  legacy:
    image: legacy:1
    expose: ["3000"]
    environment:
      - VIRTUAL_HOST=old.example.com,OLD2.example.com
  blog:
    image: ghost:5
    environment:
      VIRTUAL_HOST: blog.example.com
      VIRTUAL_PORT: "2368"
  admin:
    image: admin:1
    labels:
      traefik.http.routers.adm.rule: Host(` + "`admin.example.com`" + `)
      traefik.http.routers.adm.tls.certresolver: le
      traefik.http.services.adm.loadbalancer.server.port: "9000"
  app:
    image: app:1
    ports: ["80"]
    labels:
      - "traefik.http.routers.app.rule=Host(` + "`app.example.com`" + `)"
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	web := svcOf(t, res.Spec, "web")
	assert.Equal(t, []core.HTTPInterface{{Port: 8080, Host: "shop.example.com", Visibility: "public"}}, web.HTTP)
	assert.Equal(t, []core.L4Interface{{Port: 9090, Publish: "0.0.0.0:9090"}}, web.TCP, "the routed port is HTTP, the other stays TCP")
	assert.Equal(t, core.Readiness{Type: "http", Path: "/healthz", Port: 8080}, web.Readiness)
	assert.Contains(t, res.Notes, "web: port 8080:8080 is served by the edge as http://shop.example.com (the host port is not published)")

	legacy := svcOf(t, res.Spec, "legacy")
	assert.Equal(t, []core.HTTPInterface{{Port: 3000, Host: "old.example.com", Visibility: "public"}, {Port: 3000, Host: "old2.example.com", Visibility: "public"}}, legacy.HTTP, "several hosts share a port")
	assert.Equal(t, []core.HTTPInterface{{Port: 2368, Host: "blog.example.com", Visibility: "public"}}, svcOf(t, res.Spec, "blog").HTTP)
	assert.Equal(t, []core.HTTPInterface{{Port: 9000, Host: "admin.example.com", Visibility: "public"}}, svcOf(t, res.Spec, "admin").HTTP)
	app := svcOf(t, res.Spec, "app")
	assert.Equal(t, []core.HTTPInterface{{Port: 80, Host: "app.example.com", Visibility: "public"}}, app.HTTP, "a port without a host port that a host routes is the HTTP interface")
	assert.Empty(t, app.TCP)
}

// x-gordon.tls is the HTTP interface's tls policy (auto, always, never).
func TestCompose_XGordonTLSPolicy(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: web:1
    expose: ["8080"]
    x-gordon: { host: shop.example.com, tls: always }
  plain:
    image: plain:1
    expose: ["8080"]
    x-gordon: { host: plain.example.com, tls: never }
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	assert.Equal(t, []core.HTTPInterface{{Port: 8080, Host: "shop.example.com", Visibility: "public", TLS: core.TLSAlways}}, svcOf(t, res.Spec, "web").HTTP)
	assert.Equal(t, []core.HTTPInterface{{Port: 8080, Host: "plain.example.com", Visibility: "public", TLS: core.TLSNever}}, svcOf(t, res.Spec, "plain").HTTP)
}

func TestCompose_LoadingLikeDockerCompose(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"compose.yaml": `
services:
  web:
    image: web:${TAG:-1.0}
    environment:
      GREETING: ${GREETING}
      LEVEL: ${LEVEL:-info}
    env_file: [web.env]
  debug:
    image: debug:1
    profiles: [debug]
`,
		"compose.override.yaml": "services:\n  web:\n    environment:\n      EXTRA: \"1\"\n",
		".env":                  "GREETING=hello\n",
		"prod.env":              "GREETING=bonjour\nTAG=2.0\n",
		"web.env":               "FROM_FILE=yes\n",
	})
	f := func(n string) string { return filepath.Join(dir, n) }

	// The directory names the project; .env interpolates; a profiled
	// service stays out; one -f loads only that file.
	res, err := Load(context.Background(), Options{Files: []string{f("compose.yaml")}, Environ: []string{}})
	require.NoError(t, err)
	assert.Equal(t, "proj", res.Spec.Name)
	web := svcOf(t, res.Spec, "web")
	assert.Equal(t, "web:1.0", web.Image)
	assert.Equal(t, map[string]string{"GREETING": "hello", "LEVEL": "info", "FROM_FILE": "yes"}, web.Env)
	_, hasDebug := res.Spec.Service("debug")
	assert.False(t, hasDebug, "a service of a profile not enabled is not deployed")

	// Several -f merge in order; --env-file replaces .env; --profile
	// enables; --project-name names; the process environment wins.
	res, err = Load(context.Background(), Options{
		Files: []string{f("compose.yaml"), f("compose.override.yaml")}, EnvFiles: []string{f("prod.env")},
		Profiles: []string{"debug"}, ProjectName: "shop", Environ: []string{"LEVEL=debug"},
	})
	require.NoError(t, err)
	assert.Equal(t, "shop", res.Spec.Name)
	web = svcOf(t, res.Spec, "web")
	assert.Equal(t, "web:2.0", web.Image)
	assert.Equal(t, map[string]string{"GREETING": "bonjour", "LEVEL": "debug", "FROM_FILE": "yes", "EXTRA": "1"}, web.Env)
	svcOf(t, res.Spec, "debug")

	// No -f: compose.yaml and its override in the project directory.
	res, err = Load(context.Background(), Options{WorkDir: dir, Environ: []string{}})
	require.NoError(t, err)
	assert.Equal(t, "1", svcOf(t, res.Spec, "web").Env["EXTRA"])
}

func TestCompose_ConvertOutputIsTheSameManifest(t *testing.T) {
	res, err := load(t, "testdata/shop", "compose.yaml")
	require.NoError(t, err)
	spec, err := manifest.Parse("app.toml", res.Manifest)
	require.NoError(t, err, "convert's output validates as a manifest")
	assert.Equal(t, res.Spec, spec, "and parses to the spec deploy -f compose.yaml deploys")
	assert.True(t, IsCompose(mustRead(t, "testdata/shop/compose.yaml")))
	assert.False(t, IsCompose(res.Manifest), "a TOML manifest is not compose")
}

func TestCompose_UpdateOrder(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: app
services:
  a:
    image: a:1
    deploy: { update_config: { order: start-first } }
  b:
    image: b:1
    deploy: { update_config: { order: stop-first } }
  c:
    image: c:1
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	assert.Equal(t, core.ReplaceOverlap, svcOf(t, res.Spec, "a").Replace)
	assert.Equal(t, core.ReplaceSequential, svcOf(t, res.Spec, "b").Replace)
	assert.Equal(t, "", svcOf(t, res.Spec, "c").Replace)
	prev := core.ServiceSpec{Name: "b", Image: "b:0"}
	assert.False(t, core.CanOverlap(svcOf(t, res.Spec, "b"), &prev), "stop-first is never overlapped (R16)")
	assert.True(t, core.CanOverlap(svcOf(t, res.Spec, "a"), &prev))
}

func TestCompose_VolumesBindsSecrets(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: app
services:
  db:
    image: db:1
    volumes:
      - data:/var/lib/data
      - /srv/approved:/etc/app:ro
      - type: tmpfs
        target: /cache
        tmpfs: { size: 1048576 }
    secrets: [pw, { source: token, target: api_token }]
volumes:
  data: {}
secrets:
  pw: { file: ./pw.txt }
  token: { environment: TOKEN }
`, "pw.txt": "hunter2"})
	res, err := Load(context.Background(), Options{Files: []string{filepath.Join(dir, "compose.yaml")}, Environ: []string{"TOKEN=t0k"}, BindName: testBinds})
	require.NoError(t, err)
	db := svcOf(t, res.Spec, "db")
	assert.Equal(t, []core.VolumeMount{{Name: "data", Path: "/var/lib/data"}}, db.Volumes)
	assert.Equal(t, []core.BindMount{{Name: "approved", Path: "/etc/app", ReadOnly: true}}, db.Binds)
	assert.Equal(t, []core.TmpfsMount{{Path: "/cache", Options: "size=1048576"}}, db.Container.Tmpfs)
	assert.Equal(t, []core.SecretRef{{Env: "api_token", Name: "token", As: "file"}, {Env: "pw", Name: "pw", As: "file"}}, db.Secrets)
	require.Len(t, res.Secrets, 2)
	values := map[string]string{}
	for _, s := range res.Secrets {
		v, err := s.Value()
		require.NoError(t, err)
		values[s.Name] = string(v)
	}
	assert.Equal(t, map[string]string{"pw": "hunter2", "token": "t0k"}, values)
	assert.NotContains(t, string(res.Manifest), "hunter2", "a secret's value never reaches the manifest")
	assert.NotContains(t, string(res.Manifest), "t0k")
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return b
}
