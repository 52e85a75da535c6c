package compose

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// writeProject writes files (name → content) into a new directory.
func writeProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	return dir
}

// refusal loads a one-file project and returns its only problem with the
// given key, failing when the load succeeds.
func refusal(t *testing.T, yaml, key string) Problem {
	t.Helper()
	dir := writeProject(t, map[string]string{"compose.yaml": yaml})
	_, err := load(t, dir, "compose.yaml")
	require.Error(t, err)
	require.ErrorIs(t, err, core.ErrInvalid)
	var cerr *Error
	require.True(t, errors.As(err, &cerr), "want *compose.Error, got %T: %v", err, err)
	for _, p := range cerr.Problems {
		if p.Key == key {
			return p
		}
	}
	t.Fatalf("no problem with key %s in:\n%v", key, err)
	return Problem{}
}

const webHead = "name: shop\nservices:\n  web:\n    image: web:1\n"

// TestCompose_Refusals: every key that cannot be honoured is an error
// naming the key, the service, the file and line, and what to do.
func TestCompose_Refusals(t *testing.T) {
	cases := []struct {
		name, yaml, key string
		line            int
		want            string
	}{
		{"network_mode host", webHead + "    network_mode: host\n", "services.web.network_mode", 5, "publish what must be reached with ports:"},
		{"network_mode service", webHead + "    network_mode: service:db\n  db:\n    image: db:1\n", "services.web.network_mode", 5, "every service joins the app network"},
		{"privileged", webHead + "    privileged: true\n", "services.web.privileged", 5, "cap_add"},
		{"replicas of a volume-backed service", webHead + "    deploy:\n      replicas: 3\n    volumes: [data:/data]\nvolumes: {data: {}}\n", "services.web.deploy.replicas", 6, "replicas = 3: the service runs one instance (single-writer: volume data)"},
		{"scale of a volume-backed service", webHead + "    scale: 2\n    volumes: [data:/data]\nvolumes: {data: {}}\n", "services.web.scale", 5, "replicas = 2: the service runs one instance"},
		{"build ssh", "services:\n  web:\n    build:\n      context: .\n      ssh: [default]\n", "services.web.build.ssh", 5, "no SSH agent"},
		{"build dockerfile_inline", "services:\n  web:\n    build:\n      dockerfile_inline: FROM scratch\n", "services.web.build.dockerfile_inline", 4, "into the context"},
		{"pid host", webHead + "    pid: host\n", "services.web.pid", 5, "own PID namespace"},
		{"ipc host", webHead + "    ipc: host\n", "services.web.ipc", 5, "own IPC namespace"},
		{"links", webHead + "    links: [db]\n  db:\n    image: db:1\n", "services.web.links", 5, "by service name"},
		{"external_links", webHead + "    external_links: [other]\n", "services.web.external_links", 5, "external network"},
		{"hostname", webHead + "    hostname: box\n", "services.web.hostname", 5, "remove hostname"},
		{"unknown key", webHead + "    mac_address: 02:42:ac:11:00:02\n", "services.web.mac_address", 5, "cannot share a MAC address"},
		{"generic unsupported", webHead + "    cpu_shares: 512\n", "services.web.cpu_shares", 5, "cannot honour cpu_shares"},
		{"restart no", webHead + "    restart: \"no\"\n", "services.web.restart", 5, "keeps every service running"},
		{"pull_policy always", webHead + "    pull_policy: always\n", "services.web.pull_policy", 5, "--pull always"},
		{"port without host", webHead + "    ports: [\"8080\"]\n", "services.web.ports[0]", 5, "random one"},
		{"anonymous volume", webHead + "    volumes:\n      - /data\n", "services.web.volumes[0]", 6, "name it"},
		{"bind not approved", webHead + "    volumes:\n      - /srv/other:/data\n", "services.web.volumes[0]", 6, "not approved"},
		{"external volume", webHead + "volumes:\n  data:\n    external: true\n", "volumes.data.external", 7, "creates and owns"},
		{"start-first on volume service", webHead + "    volumes: [data:/data]\n    deploy:\n      update_config:\n        order: start-first\nvolumes: {data: {}}\n", "services.web.deploy.update_config.order", 8, "single-writer: volume data"},
		{"bad order", webHead + "    deploy:\n      update_config:\n        order: random\n", "services.web.deploy.update_config.order", 7, "must be one of 'start-first', 'stop-first'"},
		{"failure_action continue", webHead + "    deploy:\n      update_config:\n        failure_action: continue\n", "services.web.deploy.update_config.failure_action", 7, "old generation keeps serving"},
		{"update delay", webHead + "    deploy:\n      update_config:\n        delay: 10s\n", "services.web.deploy.update_config.delay", 7, "cannot be honoured"},
		{"placement preferences", webHead + "    deploy:\n      placement:\n        preferences: [{spread: node.labels.zone}]\n", "services.web.deploy.placement.preferences", 7, "spread over the nodes"},
		{"bad placement constraint", webHead + "    deploy:\n      placement:\n        constraints: [\"zone=a\"]\n", "services.web.deploy.placement.constraints", 7, "invalid placement constraint"},
		{"reservations", webHead + "    deploy:\n      resources:\n        reservations:\n          memory: 1g\n", "services.web.deploy.resources.reservations", 7, "only limits"},
		{"one-shot with a port", webHead + "    depends_on:\n      migrate:\n        condition: service_completed_successfully\n  migrate:\n    image: m:1\n    ports: [\"9000:9000\"]\n", "services.migrate.ports[0]", 10, "serves nothing"},
		{"one-shot restarted", webHead + "    depends_on:\n      migrate:\n        condition: service_completed_successfully\n  migrate:\n    image: m:1\n    restart: on-failure\n", "services.migrate.restart", 10, "runs once per deploy"},
		{"healthy without healthcheck", webHead + "    depends_on:\n      db:\n        condition: service_healthy\n  db:\n    image: db:1\n", "services.web.depends_on.db", 6, "has no healthcheck"},
		{"tls not auto", webHead + "    x-gordon:\n      host: a.example.com\n      port: 80\n      tls: off\n", "services.web.x-gordon.tls", 8, "want auto"},
		{"x-gordon unknown key", webHead + "    x-gordon:\n      hots: a.example.com\n", "services.web.x-gordon.hots", 6, "want host, port, tls, readiness, monitor, snapshots, node, sleep_after or wake_ignore"},
		{"x-gordon no port", webHead + "    x-gordon:\n      host: a.example.com\n", "services.web.x-gordon.host", 6, "set x-gordon.port"},
		{"x-gordon bad host", webHead + "    x-gordon:\n      host: A_B\n      port: 80\n", "services.web.x-gordon.host", 6, "invalid host"},
		{"x-gordon readiness bad type", webHead + "    x-gordon:\n      readiness:\n        type: grpc\n", "services.web.x-gordon.readiness.type", 7, "grpc"},
		{"traefik path rule", webHead + "    expose: [80]\n    labels:\n      traefik.http.routers.w.rule: PathPrefix(`/api`)\n", "services.web.labels.traefik.http.routers.w.rule", 7, "routes by Host only"},
		{"traefik middlewares", webHead + "    expose: [80]\n    labels:\n      - traefik.http.routers.w.rule=Host(`a.example.com`)\n      - traefik.http.routers.w.middlewares=auth\n", "services.web.labels", 8, "middlewares"},
		{"host routed twice", webHead + "    expose: [80]\n    x-gordon:\n      host: a.example.com\n  api:\n    image: api:1\n    expose: [80]\n    environment:\n      VIRTUAL_HOST: a.example.com\n", "services.web.x-gordon.host", 7, "already routed by services.api.environment.VIRTUAL_HOST"},
		{"external config", webHead + "configs:\n  c:\n    external: true\n", "configs.c.external", 7, "give file: PATH"},
		{"writable project directory", webHead + "    volumes: [\"./data:/data\"]\n", "services.web.volumes[0]", 5, "use a named volume"},
		{"secret target elsewhere", webHead + "    secrets:\n      - source: s\n        target: /etc/s\nsecrets:\n  s:\n    file: ./s\n", "services.web.secrets[0]", 6, "/run/secrets/NAME"},
		{"privileged device remap", webHead + "    devices: [\"/dev/ttyUSB0:/dev/ttyS0\"]\n", "services.web.devices[0]", 5, "host path"},
		{"network addresses", webHead + "    networks:\n      back:\n        ipv4_address: 172.28.0.5\nnetworks:\n  back: {}\n", "services.web.networks.back", 6, "reached by its name and aliases"},
		{"start_interval", webHead + "    healthcheck:\n      test: [\"CMD\", \"true\"]\n      start_interval: 1s\n", "services.web.healthcheck.start_interval", 7, "1.44"},
		{"invalid service name", "name: shop\nservices:\n  my_web:\n    image: web:1\n", "services.my_web", 3, "invalid service name"},
		{"project name", "name: my_shop\nservices:\n  web:\n    image: web:1\n", "name", 1, "invalid app name"},
		{"stop_grace too long", webHead + "    stop_grace_period: 10m\n", "services.web.stop_grace_period", 5, "5m"},
		{"bad stop signal", webHead + "    stop_signal: SIGNOPE\n", "services.web.stop_signal", 5, "SIGNOPE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := refusal(t, c.yaml, c.key)
			assert.Equal(t, c.line, p.Line, "line of %s: %s", c.key, p)
			assert.True(t, strings.HasSuffix(p.File, "compose.yaml"), "file: %s", p)
			assert.Contains(t, p.String(), fmt.Sprintf("compose.yaml:%d:", c.line))
			assert.Contains(t, p.Message, c.want)
		})
	}
}

// TestCompose_RefusalsAllAtOnce: every problem of a project is reported in
// one error, in line order; nothing is converted.
func TestCompose_RefusalsAllAtOnce(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": webHead + "    privileged: true\n    network_mode: host\n  db:\n    image: db:1\n    links: [web]\n"})
	res, err := load(t, dir, "compose.yaml")
	require.Nil(t, res)
	var cerr *Error
	require.True(t, errors.As(err, &cerr))
	var keys []string
	for _, p := range cerr.Problems {
		keys = append(keys, fmt.Sprintf("%d %s", p.Line, p.Key))
	}
	assert.Equal(t, []string{"5 services.web.privileged", "6 services.web.network_mode", "9 services.db.links"}, keys)
}

// TestCompose_OverrideLocatesLastFile: a key set by an override file is
// reported at the override's line.
func TestCompose_OverrideLocatesLastFile(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"compose.yaml":          webHead,
		"compose.override.yaml": "services:\n  web:\n    privileged: true\n",
	})
	_, err := load(t, dir, "compose.yaml", "compose.override.yaml")
	var cerr *Error
	require.True(t, errors.As(err, &cerr), "%v", err)
	require.Len(t, cerr.Problems, 1)
	p := cerr.Problems[0]
	assert.True(t, strings.HasSuffix(p.File, "compose.override.yaml"), "%s", p)
	assert.Equal(t, 3, p.Line)
}

// TestCompose_RefusalsAndManifestRulesAtOnce: a key the mapping refuses and
// the manifest rules the mapped project breaks come back in one error, each
// at its compose line; a service that is built has no missing image.
func TestCompose_RefusalsAndManifestRulesAtOnce(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": webHead +
		"    privileged: true\n    stop_grace_period: 10m\n    mem_limit: 1m\n" +
		"  api:\n    build: .\n    stop_signal: SIGNOPE\n"})
	_, err := load(t, dir, "compose.yaml")
	var cerr *Error
	require.True(t, errors.As(err, &cerr), "%v", err)
	var keys []string
	for _, p := range cerr.Problems {
		keys = append(keys, fmt.Sprintf("%d %s", p.Line, p.Key))
		assert.NotContains(t, p.Message, "required: the image reference", "a refused build is not also a missing image: %s", p)
	}
	assert.Equal(t, []string{
		"5 services.web.privileged",
		"6 services.web.stop_grace_period",
		"7 services.web.mem_limit",
		"10 services.api.stop_signal",
	}, keys)
}

// TestCompose_ProjectChecksAreLocated: compose-go's project checks (a
// depends_on cycle, a reference to an undefined service, network, volume
// or secret) are refusals at the entry's file and line, saying what to do.
func TestCompose_ProjectChecksAreLocated(t *testing.T) {
	cases := []struct {
		name, yaml, key string
		line            int
		want            string
	}{
		{"depends_on cycle, list form", "name: shop\nservices:\n  a:\n    image: a:1\n    depends_on: [b]\n  b:\n    image: b:1\n    depends_on: [a]\n",
			"services.a.depends_on", 5, "dependency cycle: a -> b -> a; remove one of these depends_on entries"},
		{"depends_on cycle, mapping form", "name: shop\nservices:\n  a:\n    image: a:1\n    depends_on:\n      b: { condition: service_started }\n  b:\n    image: b:1\n    depends_on:\n      a: { condition: service_started }\n",
			"services.a.depends_on.b", 6, "dependency cycle: a -> b -> a"},
		{"undefined service", "name: shop\nservices:\n  a:\n    image: a:1\n    depends_on:\n      - bb\n      - c\n  bb:\n    image: b:1\n",
			"services.a.depends_on", 7, `depends on undefined service "c": declare c under services:, or remove it from depends_on`},
		{"undefined network", "name: shop\nservices:\n  a:\n    image: a:1\n    networks: [front]\n",
			"services.a.networks", 5, "refers to undefined network front: declare it under the top-level networks:, or remove it"},
		{"undefined volume", "name: shop\nservices:\n  a:\n    image: a:1\n    volumes:\n      - data:/data\n",
			"services.a.volumes", 6, "refers to undefined volume data: declare it under the top-level volumes:"},
		{"undefined secret", "name: shop\nservices:\n  a:\n    image: a:1\n    secrets: [tok]\n",
			"services.a.secrets", 5, "refers to undefined secret tok: declare it under the top-level secrets:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{"compose.yaml": c.yaml})
			_, err := load(t, dir, "compose.yaml")
			require.ErrorIs(t, err, core.ErrInvalid)
			var cerr *Error
			require.True(t, errors.As(err, &cerr), "want *compose.Error, got %T: %v", err, err)
			require.Len(t, cerr.Problems, 1, "%v", err)
			p := cerr.Problems[0]
			assert.Equal(t, c.key, p.Key)
			assert.Equal(t, "a", p.Service)
			assert.Equal(t, c.line, p.Line, "%s", p)
			assert.True(t, strings.HasSuffix(p.File, "compose.yaml"), "file: %s", p)
			assert.Contains(t, p.Message, c.want)
		})
	}
}

// TestCompose_LoaderErrorsAreLocated: values the loader cannot decode (all
// of them in one error) and variables it cannot interpolate are refusals at
// their compose file and line, not bare loader messages.
func TestCompose_LoaderErrorsAreLocated(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string // "line key: message part"
	}{
		{"sizes that do not decode", webHead + "    mem_limit: lots\n    shm_size: huge\n  db:\n    image: db:1\n    deploy:\n      resources:\n        limits:\n          memory: much\n", []string{
			`5 services.web.mem_limit: invalid size 'lots': want a byte size such as "512m"`,
			`6 services.web.shm_size: invalid size 'huge'`,
			`12 services.db.deploy.resources.limits.memory: invalid size 'much'`,
		}},
		{"unknown service key", "name: shop\nservices:\n  web:\n    image: web:1\n    bogus: 1\n", []string{
			`5 services.web.bogus: unknown key "bogus" under services.web: the compose specification defines no such key there (check its spelling and indentation; a key of your own must start with x-)`,
		}},
		{"unknown top-level key", "name: shop\nservise:\n  web:\n    image: web:1\nservices:\n  web:\n    image: web:1\n", []string{
			`2 servise: unknown key "servise" under the top level`,
		}},
		{"required variable", "name: shop\nservices:\n  web:\n    image: ${TAG:?set TAG}\n", []string{
			"4 services.web.image: cannot interpolate: required variable TAG is missing a value: set TAG",
		}},
		{"interpolation format", "name: shop\nservices:\n  web:\n    image: \"web:${TAG\"\n", []string{
			`4 services.web.image: invalid interpolation format in "web:${TAG": write ${VAR}`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{"compose.yaml": c.yaml})
			_, err := load(t, dir, "compose.yaml")
			require.ErrorIs(t, err, core.ErrInvalid)
			var cerr *Error
			require.True(t, errors.As(err, &cerr), "want *compose.Error, got %T: %v", err, err)
			require.Len(t, cerr.Problems, len(c.want), "%v", err)
			for i, p := range cerr.Problems {
				assert.True(t, strings.HasSuffix(p.File, "compose.yaml"), "file: %s", p)
				assert.Contains(t, fmt.Sprintf("%d %s: %s", p.Line, p.Key, p.Message), c.want[i])
			}
		})
	}
}

// container_name and network aliases keep their meaning: extra names on
// the app network (the container keeps its per-generation name, so an
// overlap still works); stdin_open and tty are accepted and noted.
func TestCompose_ContainerNameAndAliasesAreNetworkAliases(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `name: shop
services:
  web:
    image: nginx:1
    container_name: shop_web
    stdin_open: true
    tty: true
    networks:
      back:
        aliases: [www, shop_web]
  db:
    image: postgres:16
    container_name: db
networks:
  back: {}
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	assert.Contains(t, string(res.Manifest), `aliases = ['shop_web', 'www']`)
	notes := strings.Join(res.Notes, "\n")
	assert.Contains(t, notes, "container_name shop_web is an alias on the app network")
	assert.Contains(t, notes, "stdin_open and tty have no effect")
	assert.Contains(t, notes, "container_name db is the service name")
}

// An unset variable that breaks a volume spec (compose says only
// ":/media/") is reported at its file and line, with the variable's name.
func TestCompose_UnsetVariableInAVolumeIsLocated(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": "services:\n  plex:\n    image: plex:1\n    volumes:\n      - ${MEDIA}:/media/\n      - cfg:/config\nvolumes:\n  cfg: {}\n"})
	_, err := load(t, dir, "compose.yaml")
	require.Error(t, err)
	var cerr *Error
	require.True(t, errors.As(err, &cerr), "want *compose.Error, got %T: %v", err, err)
	require.Len(t, cerr.Problems, 1)
	p := cerr.Problems[0]
	assert.Equal(t, 5, p.Line)
	assert.Contains(t, p.Message, "variable MEDIA is not set")
	assert.Contains(t, err.Error(), "compose.yaml:5:9:")
}
