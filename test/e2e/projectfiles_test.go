package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// projectFilesProject writes a compose project as users write them: web
// built from ./web (a Dockerfile that copies only the httpd workload),
// its configuration file bound from the project, a container_name and
// stdin_open/tty. It returns the compose file and the project directory.
func projectFilesProject(t *testing.T, app, host string) (file, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), app)
	web := filepath.Join(dir, "web")
	require.NoError(t, os.MkdirAll(web, 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, testimages.Compile(ctx, web, "httpd"))
	writeWebDockerfile(t, web, "v1", "")
	fixture.WriteFile(t, filepath.Join(web, "NOTES.md"), "not copied by the Dockerfile\n")
	fixture.WriteFile(t, filepath.Join(dir, "app.conf"), "greeting = one\n")
	file = filepath.Join(dir, "compose.yaml")
	fixture.WriteFile(t, file, fmt.Sprintf(`name: %s
services:
  web:
    build: ./web
    container_name: %s-frontend
    stdin_open: true
    tty: true
    volumes:
      - ./app.conf:/etc/app/app.conf:ro
    healthcheck:
      test: ["CMD", "/httpd", "-get", "http://127.0.0.1:8080/healthz"]
      interval: 1s
      timeout: 2s
      retries: 5
    stop_grace_period: 2s
    x-gordon:
      host: %s
      port: 8080
`, app, app, host))
	return file, dir
}

// containerFile returns the content of path in container id, read with
// docker cp through the docker CLI arguments dockerArgs ("-H", addr for
// another engine).
func containerFile(t *testing.T, dockerArgs []string, id, path string) string {
	t.Helper()
	out, err := exec.Command("docker", append(dockerArgs, "cp", id+":"+path, "-")...).Output()
	require.NoError(t, err, "docker cp %s:%s", id, path)
	tr := tar.NewReader(bytes.NewReader(out))
	h, err := tr.Next()
	require.NoError(t, err)
	data, err := io.ReadAll(tr)
	require.NoError(t, err)
	assert.Equal(t, int64(0o444), h.Mode&0o777, "read-only, readable by all")
	return string(data)
}

// SPEC R82 and the compose mappings: a project with build:, a bound
// project file, container_name and stdin_open deploys; the file is in the
// container; changing only the file redeploys under load with zero failed
// requests; a context change the Dockerfile does not copy builds the same
// image and replaces nothing; the same files again replace nothing.
func TestCompose_ProjectFileBuildContainerNameStdinOpen(t *testing.T) {
	removeBuiltImages(t, "e2epfiles")
	a := fixture.NewApp(t, "e2epfiles")
	state, app, edge := a.State, a.Name, a.Edge
	host := "pfiles.test"
	file, dir := projectFilesProject(t, app, host)

	r := fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stderr, "stdin_open")
	web1 := fixture.Managed(t, app, "web")
	require.Len(t, web1, 1)
	assert.Equal(t, "greeting = one\n", containerFile(t, nil, web1[0], "/etc/app/app.conf"))
	aliases, err := exec.Command("docker", "inspect", "-f", "{{json .NetworkSettings.Networks}}", web1[0]).Output()
	require.NoError(t, err)
	assert.Contains(t, string(aliases), app+"-frontend", "container_name is an alias on the app network")
	code, body, err := edge.Get(host, "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)

	// Only the file changes: the service is replaced (overlap: a project
	// file is read-only), under load, losing nothing.
	fixture.WriteFile(t, filepath.Join(dir, "app.conf"), "greeting = two\n")
	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/", host, 8, instanceOf)
	r = fixture.Gordon(t, state, "deploy", "-f", file)
	st := l.Stop()
	require.Equal(t, 0, r.Code, r.String())
	t.Logf("load over the project-file redeploy: %s", st)
	require.Greater(t, st.Answered, int64(20))
	require.Zero(t, st.Transport, "transport errors: %v", st.Errors)
	require.Zero(t, st.Non2xx, "non-2xx: %v", st.Errors)
	web2 := fixture.Managed(t, app, "web")
	require.Len(t, web2, 1)
	require.NotEqual(t, web1, web2, "a changed file replaces the service")
	assert.Equal(t, "greeting = two\n", containerFile(t, nil, web2[0], "/etc/app/app.conf"))

	// A context file the Dockerfile does not copy: built, same image ID,
	// nothing replaced.
	fixture.WriteFile(t, filepath.Join(dir, "web", "NOTES.md"), "edited, still not copied\n")
	r = fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stderr, "build web: built ", "the context changed: it is built")
	assert.Regexp(t, `(?m)^web +unchanged`, r.Stderr)
	assert.Equal(t, web2, fixture.Managed(t, app, "web"), "nothing replaced")

	// The same files again: nothing replaced.
	r = fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	assert.Equal(t, web2, fixture.Managed(t, app, "web"), "an unchanged file replaces nothing")
}

// SPEC R82 through a remote engine: the project file travels with the
// deploy (nothing is read on the server), the container there sees it at
// its path, the server's journal has no content, a changed file replaces
// the service and an unchanged one nothing.
func TestProjectFiles_ThroughRemoteContext(t *testing.T) {
	e := startEngine2(t)
	client := t.TempDir()
	app, host := "e2epfr", "pfr.test"
	httpAddr, adminAddr := fixture.FreeAddr(t), fixture.FreeAddr(t)
	r := remote(t, e.Context, client, "edge", "start", "--http-addr", httpAddr, "--admin-addr", adminAddr)
	require.Equal(t, 0, r.Code, r.String())

	file, dir := projectFilesProject(t, app, host)
	r = remote(t, e.Context, client, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	first := e.managed(t, app)
	require.Len(t, first, 1)
	h := []string{"-H", e.TCP}
	assert.Equal(t, "greeting = one\n", containerFile(t, h, first[0], "/etc/app/app.conf"))
	stored, _ := filepath.Glob(filepath.Join(e.StateDir, "files", app, "*"))
	require.Len(t, stored, 1, "stored by content in the server's state directory")
	out, _ := exec.Command("grep", "-rl", "greeting", filepath.Join(e.StateDir, "apps", app)).Output()
	assert.Empty(t, string(bytes.TrimSpace(out)), "no file content in the server's journal")

	r = remote(t, e.Context, client, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	assert.Equal(t, first, e.managed(t, app), "an unchanged file replaces nothing")

	fixture.WriteFile(t, filepath.Join(dir, "app.conf"), "greeting = two\n")
	r = remote(t, e.Context, client, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	second := e.managed(t, app)
	require.Len(t, second, 1)
	require.NotEqual(t, first, second, "a changed file replaces the service")
	assert.Equal(t, "greeting = two\n", containerFile(t, h, second[0], "/etc/app/app.conf"))
	edge := &fixture.Edge{HTTPAddr: httpAddr}
	code, body, err := edge.Get(host, "/")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
}
