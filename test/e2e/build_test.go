package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// buildProject writes a compose project whose web service is built from
// ./web: a Dockerfile FROM scratch that copies the httpd test workload,
// compiled here beforehand (nothing can be pulled), and a .dockerignore.
func buildProject(t *testing.T, app, host string) (file, web string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), app)
	web = filepath.Join(dir, "web")
	require.NoError(t, os.MkdirAll(web, 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, testimages.Compile(ctx, web, "httpd"))
	fixture.WriteFile(t, filepath.Join(web, ".dockerignore"), "*.log\n")
	fixture.WriteFile(t, filepath.Join(web, "debug.log"), "not sent")
	writeWebDockerfile(t, web, "v1", "")
	file = filepath.Join(dir, "compose.yaml")
	fixture.WriteFile(t, file, fmt.Sprintf(`name: %s
services:
  web:
    build: ./web
    healthcheck:
      test: ["CMD", "/httpd", "-get", "http://127.0.0.1:8080/healthz"]
      interval: 1s
      timeout: 2s
      retries: 5
    stop_grace_period: 2s
    x-gordon:
      host: %s
      port: 8080
`, app, host))
	return file, web
}

func writeWebDockerfile(t *testing.T, web, version, extra string) {
	t.Helper()
	fixture.WriteFile(t, filepath.Join(web, "Dockerfile"), "FROM scratch\nCOPY httpd /httpd\n"+extra+"ENV VERSION="+version+"\nENTRYPOINT [\"/httpd\"]\n")
}

// removeBuiltImages removes, at the end of the test, the images its
// builds tagged gordon/<app>-*; register it before the app's cleanup (an
// image a container still uses is not removed).
func removeBuiltImages(t *testing.T, app string) {
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "image", "ls", "-q", "--filter", "reference=gordon/"+app+"-*").Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "image", "rm", "-f", id).Run()
		}
	})
}

// opDigests returns service → the digest (for a built image: its ID) of
// each service step of the op JSON deploy printed.
func opDigests(t *testing.T, stdout string) map[string]string {
	t.Helper()
	var op struct {
		Steps []struct{ ID, Service, Digest, Image, Detail string }
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &op), stdout)
	out := map[string]string{}
	for _, s := range op.Steps {
		if strings.HasPrefix(s.ID, "service.") {
			out[s.Service] = s.Digest
		}
	}
	return out
}

var builtTagRE = regexp.MustCompile(`gordon/e2ebuild-web:[0-9a-f]{16}`)

// An image build through a remote context (a second engine): the build runs
// there (the context travels with the build API call), the image is not
// on this machine's engine, the app serves from there, an unchanged
// context builds nothing, and the server's journal names the image, not
// the build.
func TestImageBuild_ThroughRemoteContext(t *testing.T) {
	e := startEngine2(t)
	client := t.TempDir()
	app, host := "e2ebuildr", "buildr.test"
	fixture.CleanupApp(t, app)
	removeBuiltImages(t, app)
	httpAddr, adminAddr := fixture.FreeAddr(t), fixture.FreeAddr(t)
	r := remote(t, e.Context, client, "edge", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr)
	require.Equal(t, 0, r.Code, r.String())

	file, _ := buildProject(t, app, host)
	r = remote(t, e.Context, client, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	assert.Regexp(t, `build web: Step 1/\d+ : FROM scratch\n`, r.Stderr)
	tag := regexp.MustCompile(`gordon/` + app + `-web:[0-9a-f]{16}`).FindString(r.Stderr)
	require.NotEmpty(t, tag, r.Stderr)
	_, err := e.docker("image", "inspect", tag)
	require.NoError(t, err, "built on the second engine")
	require.Error(t, exec.Command("docker", "image", "inspect", tag).Run(), "and not on this machine's")
	require.Len(t, e.managed(t, app), 1)
	edge := &fixture.Edge{HTTPAddr: httpAddr}
	code, body, err := edge.Get(host, "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	assert.Equal(t, "v1", versionOf(body))

	before := e.managed(t, app)
	r = remote(t, e.Context, client, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stderr, "build web: unchanged context and settings: "+tag)
	assert.Equal(t, before, e.managed(t, app), "no new generation")

	revs, _ := filepath.Glob(filepath.Join(e.StateDir, "apps", app, "*"))
	require.NotEmpty(t, revs)
	out, _ := exec.Command("grep", "-rl", "context", filepath.Join(e.StateDir, "apps", app)).Output()
	assert.Empty(t, strings.TrimSpace(string(out)), "no build context in the server's journal")
	out, _ = exec.Command("grep", "-rl", tag, filepath.Join(e.StateDir, "apps", app)).Output()
	assert.NotEmpty(t, strings.TrimSpace(string(out)), "the journal names the built image")
}

// SPEC R12 (image builds): a compose project whose web service has build:
// ./web deploys, built on the engine (one progress line per step, the op
// JSON gives the image ID); an unchanged context builds nothing and
// deploys nothing new; a source change redeploys under load with zero
// failed requests; a broken Dockerfile fails the deploy naming the
// failing step with the old generation still serving; --no-build refuses
// an image that is not built.
func TestImageBuild_OnDeploy(t *testing.T) {
	removeBuiltImages(t, "e2ebuild") // before NewApp: runs after the containers are removed
	a := fixture.NewApp(t, "e2ebuild")
	state, app, edge := a.State, a.Name, a.Edge
	file, web := buildProject(t, app, "build.test")

	r := fixture.Gordon(t, state, "deploy", "-f", file, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	assert.Regexp(t, `build web: Step 1/\d+ : FROM scratch\n`, r.Stderr)
	assert.Regexp(t, `build web: Step 4/\d+ : ENTRYPOINT \["/httpd"\]\n`, r.Stderr)
	tag := builtTagRE.FindString(r.Stderr)
	require.NotEmpty(t, tag, "the build's tag is named: %s", r.Stderr)
	id1 := opDigests(t, r.Stdout)["web"]
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", tag).Output()
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(out)), id1, "the op's step pins the built image by its ID")
	var withBuilds struct {
		Builds []struct {
			Service, Tag, ID string
			Built            bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &withBuilds))
	require.Len(t, withBuilds.Builds, 1, r.Stdout)
	assert.Equal(t, id1, withBuilds.Builds[0].ID, "the JSON output gives the image ID")
	assert.Equal(t, tag, withBuilds.Builds[0].Tag)
	assert.True(t, withBuilds.Builds[0].Built)
	code, body, err := edge.Get("build.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	require.Equal(t, "v1", versionOf(body))
	web1 := fixture.Managed(t, app, "web")

	// Unchanged context and settings (a touched file, an ignored file
	// changed): no build, no new image, no new generation.
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(filepath.Join(web, "httpd"), later, later))
	fixture.WriteFile(t, filepath.Join(web, "debug.log"), "changed, and ignored")
	r = fixture.Gordon(t, state, "deploy", "-f", file, "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stderr, "build web: unchanged context and settings: "+tag)
	assert.NotRegexp(t, `Step 1/\d+`, r.Stderr)
	assert.Equal(t, id1, opDigests(t, r.Stdout)["web"], "no new image ID")
	assert.Equal(t, web1, fixture.Managed(t, app, "web"), "no new generation")

	// A source change redeploys under load, losing nothing.
	writeWebDockerfile(t, web, "v2", "")
	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/", "build.test", 8, instanceOf)
	r = fixture.Gordon(t, state, "deploy", "-f", file, "--format", "json", "--quiet")
	st := l.Stop()
	require.Equal(t, 0, r.Code, r.String())
	assert.NotRegexp(t, `Step 1/\d+`, r.Stderr, "--quiet drops the build's progress")
	t.Logf("load over the rebuilt redeploy: %s", st)
	require.Greater(t, st.Answered, int64(20))
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)
	id2 := opDigests(t, r.Stdout)["web"]
	require.NotEqual(t, id1, id2, "a new image")
	_, body, err = edge.Get("build.test", "/")
	require.NoError(t, err)
	require.Equal(t, "v2", versionOf(body))
	web2 := fixture.Managed(t, app, "web")
	require.NotEqual(t, web1, web2)

	// A broken Dockerfile: the deploy fails naming the step, nothing
	// changes, the old generation keeps serving.
	writeWebDockerfile(t, web, "v3", "COPY missing.txt /missing.txt\n")
	r = fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 1, r.Code, r.String())
	assert.Regexp(t, `service web: build failed at Step 3/\d+ : COPY missing.txt /missing.txt`, r.Stderr)
	assert.Contains(t, r.Stderr, "nothing was changed")
	assert.Contains(t, r.Stderr, "--- web: last ")
	assert.Equal(t, web2, fixture.Managed(t, app, "web"))
	_, body, err = edge.Get("build.test", "/")
	require.NoError(t, err)
	require.Equal(t, "v2", versionOf(body), "the old generation keeps serving")

	// --no-build: a context whose image is not built is refused.
	writeWebDockerfile(t, web, "v4", "")
	r = fixture.Gordon(t, state, "deploy", "-f", file, "--no-build")
	require.Equal(t, 1, r.Code, r.String())
	assert.Contains(t, r.Stderr, "is not built and --no-build was given")
	assert.Equal(t, web2, fixture.Managed(t, app, "web"))
}
