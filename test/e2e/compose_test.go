package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// composeProject is the acceptance project of compose input: web (a
// healthcheck, order start-first, an x-gordon host), admin routed by a
// Traefik label, db with a named volume that web depends on. GREETING and
// RELEASE come from .env; the override sets web's greeting from it.
func composeProject(t *testing.T, httpd, kv string) string {
	dir := filepath.Join(t.TempDir(), "shop")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	fixture.WriteFile(t, filepath.Join(dir, "compose.yaml"), fmt.Sprintf(`name: e2ecompose
services:
  web:
    image: %s
    environment:
      GREETING: base
      RELEASE: ${RELEASE}
    healthcheck:
      test: ["CMD", "/httpd", "-get", "http://127.0.0.1:8080/healthz"]
      interval: 1s
      timeout: 2s
      retries: 5
    depends_on: [db]
    stop_grace_period: 5s
    deploy:
      update_config:
        order: start-first
    x-gordon:
      host: shop.test
      port: 8080
  admin:
    image: %s
    stop_grace_period: 2s
    labels:
      traefik.http.routers.admin.rule: Host(`+"`admin.test`"+`)
      traefik.http.services.admin.loadbalancer.server.port: "8080"
  db:
    image: %s
    environment:
      RELEASE: ${RELEASE}
    volumes:
      - data:/data
    stop_grace_period: 2s
    x-gordon:
      readiness: { type: log, pattern: ready, timeout: 20s }
volumes:
  data:
`, httpd, httpd, kv))
	fixture.WriteFile(t, filepath.Join(dir, "compose.override.yaml"), "services:\n  web:\n    environment:\n      GREETING: ${GREETING:-unset}\n")
	fixture.WriteFile(t, filepath.Join(dir, ".env"), "GREETING=hi\nRELEASE=1\n")
	return dir
}

// Compose input against the real engine: a compose project deploys
// (two files merged, .env interpolated), both hosts answer, db is created
// before web, --dry-run shows web overlap and db sequential, a .env change
// redeploys under load with zero failed requests, and convert's output
// validates and deploys to the same containers.
func TestCompose_DeployDryRunEnvChangeConvert(t *testing.T) {
	imgs := testimages.Require(t, "v1", "httpd", "kv")
	a := fixture.NewApp(t, "e2ecompose")
	state, app, edge := a.State, a.Name, a.Edge
	dir := composeProject(t, imgs["httpd"], imgs["kv"])
	files := []string{"-f", filepath.Join(dir, "compose.yaml"), "-f", filepath.Join(dir, "compose.override.yaml")}

	r := fixture.Gordon(t, state, append([]string{"validate"}, files...)...)
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stdout, "ok (compose project, app e2ecompose, 3 service(s))")

	// First deploy: db before web (depends_on), both hosts answer, the
	// override merged over the base file with .env's value.
	ev := fixture.WatchEvents(t, app)
	r = fixture.Gordon(t, state, append([]string{"deploy", "--format", "json"}, files...)...)
	events := ev.Stop()
	require.Equal(t, 0, r.Code, r.String())
	created := map[string]int{}
	for i, e := range events {
		svc := e.Actor.Attributes["dev.gordon.service"]
		if _, seen := created[svc]; e.Status == "create" && !seen {
			created[svc] = i
		}
	}
	require.Contains(t, created, "db")
	require.Contains(t, created, "web")
	require.Less(t, created["db"], created["web"], "db is created before web: %v", created)
	code, body, err := edge.Get("shop.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	require.True(t, strings.HasPrefix(body, "hi: version=v1"), "web answers with the override's greeting from .env: %q", body)
	code, body, err = edge.Get("admin.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, "admin is routed by its Traefik label: %s", body)

	// A .env change: the plan first, then the deploy under load.
	fixture.WriteFile(t, filepath.Join(dir, ".env"), "GREETING=hello\nRELEASE=2\n")
	r = fixture.Gordon(t, state, append([]string{"deploy", "--dry-run"}, files...)...)
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stdout, "web: overlap (stateless: no volume, bind, device or UDP)")
	require.Contains(t, r.Stdout, "db: sequential (single-writer: volume data)")
	require.Contains(t, r.Stdout, "admin: unchanged")

	webBefore := fixture.Managed(t, app, "web")
	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/", "shop.test", 8, instanceOf)
	waitMoreAnswers(t, l.Snapshot, 100)
	r = fixture.Gordon(t, state, append([]string{"deploy"}, files...)...)
	waitMoreAnswers(t, l.Snapshot, 100)
	st := l.Stop()
	require.Equal(t, 0, r.Code, r.String())
	t.Logf("load over the .env redeploy: %s", st)
	require.Greater(t, st.Answered, int64(50))
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)
	require.Zero(t, st.Regressions, "a client went back to the old generation: %v", st.Errors)
	code, body, err = edge.Get("shop.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.True(t, strings.HasPrefix(body, "hello: "), "the new .env value is served: %q", body)
	require.NotEqual(t, webBefore, fixture.Managed(t, app, "web"), "web was replaced")

	// convert prints the equivalent manifest: it validates, and deploying
	// it changes no container.
	toml := filepath.Join(t.TempDir(), "app.toml")
	r = fixture.Gordon(t, state, append([]string{"convert", "-o", toml}, files...)...)
	require.Equal(t, 0, r.Code, r.String())
	r = fixture.Gordon(t, state, "validate", "-f", toml)
	require.Equal(t, 0, r.Code, r.String())
	before := map[string][]string{}
	for _, s := range []string{"web", "admin", "db"} {
		before[s] = fixture.Managed(t, app, s)
	}
	r = fixture.Gordon(t, state, "deploy", "-f", toml, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var op fixture.DeployOp
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &op))
	for _, s := range op.Steps {
		if strings.HasPrefix(s.ID, "service.") {
			require.True(t, strings.HasPrefix(s.Detail, "unchanged"), "the converted manifest deploys to the same containers: %s: %s", s.ID, s.Detail)
		}
	}
	for s, ids := range before {
		require.Equal(t, ids, fixture.Managed(t, app, s), "service %s keeps its container", s)
	}
}

// Refusals reach the CLI with file:line, exit 1, and change nothing.
func TestCompose_RefusalChangesNothing(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(t.TempDir(), "bad")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	// Named app.yml and still recognised as compose by its content.
	file := filepath.Join(dir, "app.yml")
	fixture.WriteFile(t, file, "name: e2ebad\nservices:\n  web:\n    image: nginx:1\n    network_mode: host\n    privileged: true\n")
	for _, verb := range []string{"validate", "deploy", "convert"} {
		r := fixture.Gordon(t, state, verb, "-f", file)
		require.Equal(t, 1, r.Code, r.String())
		require.Contains(t, r.Stderr, "app.yml:5:5: services.web.network_mode: network_mode: host cannot be honoured")
		require.Contains(t, r.Stderr, "app.yml:6:5: services.web.privileged:")
		require.Empty(t, r.Stdout, "%s prints nothing on stdout", verb)
	}
	_, err := os.Stat(filepath.Join(state, "apps", "e2ebad"))
	require.True(t, os.IsNotExist(err), "nothing was stored")
}

// service_completed_successfully against the real engine: the one-shot
// runs to completion after db and before web, is removed, and a one-shot
// that fails stops the deploy with its exit status while web keeps
// serving.
func TestCompose_OneShotRunsBeforeDependents(t *testing.T) {
	imgs := testimages.Require(t, "v1", "httpd", "kv")
	a := fixture.NewApp(t, "e2econce")
	state, app, edge := a.State, a.Name, a.Edge
	dir := filepath.Join(t.TempDir(), "once")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, "compose.yaml")
	project := func(path, greeting string) string {
		return fmt.Sprintf(`name: e2econce
services:
  db:
    image: %[1]s
    volumes: [data:/data]
    stop_grace_period: 2s
    x-gordon: { readiness: { type: log, pattern: ready } }
  migrate:
    image: %[2]s
    command: ["-get", "http://db:8080%[3]s"]
    restart: "no"
    depends_on: [db]
  web:
    image: %[2]s
    environment: { GREETING: %[4]s }
    secrets: [token]
    stop_grace_period: 2s
    depends_on:
      migrate: { condition: service_completed_successfully }
    x-gordon: { host: once.test, port: 8080 }
volumes:
  data:
secrets:
  token: { file: ./token.txt }
`, imgs["kv"], imgs["httpd"], path, greeting)
	}
	fixture.WriteFile(t, filepath.Join(dir, "token.txt"), "s3cr3t-value")
	fixture.WriteFile(t, file, project("/healthz", "one"))
	ev := fixture.WatchEvents(t, app)
	r := fixture.Gordon(t, state, "deploy", "-f", file)
	events := ev.Stop()
	require.Equal(t, 0, r.Code, r.String())
	order := map[string]int{}
	for i, e := range events {
		svc := e.Actor.Attributes["dev.gordon.service"]
		key := svc + "/" + e.Status
		if _, seen := order[key]; !seen {
			order[key] = i
		}
		if e.Status == "die" && svc == "migrate" {
			require.Equal(t, "0", e.Actor.Attributes["exitCode"], "the one-shot exits 0")
		}
	}
	require.Contains(t, order, "migrate/die")
	require.Less(t, order["db/start"], order["migrate/start"], "db runs before the one-shot: %v", order)
	require.Less(t, order["migrate/destroy"], order["web/create"], "the one-shot completed and was removed before web: %v", order)
	require.Empty(t, fixture.Managed(t, app, "migrate"), "no one-shot container is left")
	require.NotContains(t, r.Stdout+r.Stderr, "s3cr3t-value", "a secret's value is never printed")
	r = fixture.Gordon(t, state, "secrets", "ls", app, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stdout, `"name": "token"`, "the compose secret's file was stored in the app's secret store")
	require.NotContains(t, r.Stdout, "s3cr3t-value")
	r = fixture.GordonIn(t, state, "app-wide-value", "secrets", "set", app, "shared-token")
	require.Equal(t, 0, r.Code, r.String())
	r = fixture.Gordon(t, state, "secrets", "ls", app, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	require.Contains(t, r.Stdout, `"app_wide": true,
    "name": "shared-token"`, "an app-wide secret is listed as such")
	code, body, err := edge.Get("once.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.True(t, strings.HasPrefix(body, "one: "), body)
	webBefore := fixture.Managed(t, app, "web")

	fixture.WriteFile(t, file, project("/missing", "two"))
	r = fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 1, r.Code, "failed (R9): db unchanged and the one-shot failed, so nothing changed: %s", r.String())
	require.Contains(t, r.Stderr, "exited with status 1")
	require.Contains(t, r.Stderr, "404 Not Found", "the one-shot's last log lines are shown")
	require.Equal(t, webBefore, fixture.Managed(t, app, "web"), "web is untouched when its one-shot fails")
	require.Empty(t, fixture.Managed(t, app, "migrate"))
	code, body, err = edge.Get("once.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.True(t, strings.HasPrefix(body, "one: "), "the old generation keeps serving: %q", body)
}
