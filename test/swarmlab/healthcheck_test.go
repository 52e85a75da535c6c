package swarmlab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// hcManifest is a volume-backed HTTP service without a readiness block,
// of an image with a HEALTHCHECK, with one project file.
func hcManifest(image, version string) string {
	return fmt.Sprintf(`name = "hc"

[services.db]
image = %q
stop_grace = "5s"

[services.db.env]
VERSION = %q

[[services.db.http]]
port = 8080
host = "hc.lab"

[[services.db.volume]]
name = "data"
path = "/data"

[[services.db.config]]
source = "db.conf"
path = "/etc/db/db.conf"
`, image, version)
}

// R29 and R82 on the 3-node lab: a volume-backed service whose manifest
// declares no readiness and whose image has a HEALTHCHECK deploys (its
// readiness is the image HEALTHCHECK, read where the task runs), is
// replaced sequentially under load with no failed request, and an
// unchanged redeploy replaces nothing. Its project file is a Docker config
// named by its content: the task reads it at its path, a changed file is
// a new config, and the old one goes with the last service using it.
// Placement constraints keep a stateless service's replicas on the
// nodes that satisfy them, spread over those.
func TestSwarm_ImageHealthcheckIsTheReadinessOfAVolumeService(t *testing.T) {
	need(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	g := upGordonLab(ctx, t, "ghc", "10.79.0", false)
	require.NoError(t, testimages.Compile(ctx, g.bin, "sigd"))
	img, err := g.PushImageWith(ctx, "sigd:hc", filepath.Join(g.bin, "sigd"),
		`HEALTHCHECK --interval=1s --timeout=2s --retries=2 CMD ["/app", "health"]`)
	require.NoError(t, err)
	t.Logf("lab up, binaries built, images pushed in %v", time.Since(began).Round(time.Millisecond))
	g.must(ctx, t, "system", "start", "--registry", g.Registry, "--http-addr", ":80")

	dir := t.TempDir()
	file := filepath.Join(dir, "app.toml")
	write := func(version, conf string) {
		require.NoError(t, os.WriteFile(file, []byte(hcManifest(img, version)), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "db.conf"), []byte(conf), 0o644))
	}
	configs := func() []string {
		out, err := g.Docker(ctx, 1, "config", "ls", "--filter", "label=dev.gordon.app=hc", "--format", "{{.Name}}")
		require.NoError(t, err)
		return strings.Fields(out)
	}
	services := func() string { // full IDs
		out, err := g.Docker(ctx, 1, "service", "ls", "-q", "--filter", "label=dev.gordon.app=hc")
		require.NoError(t, err)
		if out == "" {
			return ""
		}
		full, err := g.Docker(ctx, 1, append([]string{"service", "inspect", "-f", "{{.ID}}"}, strings.Fields(out)...)...)
		require.NoError(t, err)
		return full
	}

	write("v1", "max_connections = 10\n")
	r := g.must(ctx, t, "deploy", "-f", file, "--dry-run")
	assert.Contains(t, r.out+r.err, "image HEALTHCHECK", "the effective readiness and its source")
	r = g.must(ctx, t, "deploy", "-f", file)
	t.Logf("first deploy:\n%s", r.err)
	g.answersEverywhere(ctx, t, "hc.lab", "version=v1")
	first := services()
	require.NotEmpty(t, first)
	require.Len(t, configs(), 1, "one project file, one config")
	assert.Contains(t, readSecretOfTask(ctx, t, g.Lab, strings.Fields(first)[0]), "max_connections = 10", "the task reads the file on its node")

	load := startLabLoad(t, g.Lab, "http://"+g.Nodes[1].IP+"/", "hc.lab", 4, 5*time.Minute)
	load.awaitOK(t, 50, 30*time.Second)
	write("v2", "max_connections = 20\n")
	r = g.must(ctx, t, "deploy", "-f", file)
	t.Logf("sequential redeploy:\n%s", r.err)
	load.awaitOK(t, 50, 30*time.Second)
	st := load.Stop()
	t.Logf("load during the sequential redeploy: %d OK, %d failed, longest gap %v, errors %v", st.OK, st.Failed(), st.LongestGap, st.Errors)
	assert.Zero(t, st.Failed(), "requests are held until the image HEALTHCHECK says healthy: %v", st.Errors)
	g.answersEverywhere(ctx, t, "hc.lab", "version=v2")
	second := services()
	require.NotEqual(t, first, second, "replaced")
	require.Len(t, configs(), 1, "the old file's config went with its last service")
	assert.Contains(t, readSecretOfTask(ctx, t, g.Lab, strings.Fields(second)[0]), "max_connections = 20")

	r = g.must(ctx, t, "deploy", "-f", file)
	assert.Equal(t, second, services(), "an unchanged file and spec replace nothing")

	// Placement constraints: 2 replicas kept off the manager.
	g.must(ctx, t, "deploy", "-f", writeManifest(t, fmt.Sprintf(`name = "pl"
[services.web]
image = %q
replicas = 2
placement = ["node.role == worker"]
[[services.web.http]]
port = 8080
host = "pl.lab"
`, g.httpd)))
	nodes, err := g.tasksOf(ctx, "pl", "web")
	require.NoError(t, err)
	require.Len(t, nodes, 2, "2 running replicas: %v", nodes)
	assert.NotContains(t, nodes, g.Nodes[0].Name, "none on the manager")
	assert.Equal(t, 2, distinct(nodes), "spread over the two workers: %v", nodes)
	g.answersEverywhere(ctx, t, "pl.lab", "version=")
	t.Logf("whole test in %v", time.Since(began).Round(time.Millisecond))
}
