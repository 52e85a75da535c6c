package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

func hashOf(t *testing.T, b *core.BuildSpec) string {
	t.Helper()
	c, err := readBuildContext(b)
	require.NoError(t, err)
	h, err := buildHash(c, b)
	require.NoError(t, err)
	return h
}

// TestBuild_HashIsContentAndSettings: the build tag's hash changes with a
// file's bytes, an arg, the target, the dockerfile; not with a file's
// modification time nor with a file .dockerignore excludes.
func TestBuild_HashIsContentAndSettings(t *testing.T) {
	dir := writeTree(t, map[string]string{"Dockerfile": "FROM scratch\nCOPY app /app\n", "app": "v1", ".dockerignore": "logs\n*.tmp\n", "logs/x.log": "a", "scratch.tmp": "a"})
	b := &core.BuildSpec{Context: dir, Args: map[string]string{"V": "1"}}
	h0 := hashOf(t, b)
	assert.Equal(t, h0, hashOf(t, b), "stable")

	later := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "app"), later, later))
	assert.Equal(t, h0, hashOf(t, b), "a touched file is unchanged")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "logs/x.log"), []byte("more"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other.tmp"), []byte("x"), 0o644))
	assert.Equal(t, h0, hashOf(t, b), "ignored files are not part of the context")

	for name, mod := range map[string]func(b *core.BuildSpec){
		"arg":    func(b *core.BuildSpec) { b.Args = map[string]string{"V": "2"} },
		"target": func(b *core.BuildSpec) { b.Target = "prod" },
		"labels": func(b *core.BuildSpec) { b.Labels = map[string]string{"a": "b"} },
	} {
		c := *b
		mod(&c)
		assert.NotEqual(t, h0, hashOf(t, &c), name)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app"), []byte("v2"), 0o644))
	assert.NotEqual(t, h0, hashOf(t, b), "changed content")
}

// TestBuild_ContextTarHonoursDockerignore: the tar sent to the engine has
// the context's files less those .dockerignore excludes (an exception
// with ! brings one back); the Dockerfile and .dockerignore are sent even
// when excluded, as docker build does.
func TestBuild_ContextTarHonoursDockerignore(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"docker/web.Dockerfile": "FROM scratch\n", ".dockerignore": "docker\n.git\nsecrets/*\n!secrets/public.pem\n",
		".git/HEAD": "x", "secrets/key.pem": "k", "secrets/public.pem": "p", "bin/app": "a",
	})
	c, err := readBuildContext(&core.BuildSpec{Context: dir, Dockerfile: "docker/web.Dockerfile"})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, c.writeTar(&buf))
	var names []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		assert.Zero(t, h.Uid)
		names = append(names, h.Name)
	}
	assert.ElementsMatch(t, []string{".dockerignore", "bin/", "bin/app", "docker/web.Dockerfile", "secrets/", "secrets/public.pem"}, names)

	// Without exceptions an excluded directory is skipped whole, except
	// on the way to the Dockerfile.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".dockerignore"), []byte("docker\nsecrets\n"), 0o644))
	c, err = readBuildContext(&core.BuildSpec{Context: dir, Dockerfile: "docker/web.Dockerfile"})
	require.NoError(t, err)
	assert.Equal(t, []string{".dockerignore", ".git", ".git/HEAD", "bin", "bin/app", "docker/web.Dockerfile"}, c.files)
}

// TestBuild_MissingContextOrDockerfile: a context that is not there, or
// lacks its Dockerfile, is named in the error.
func TestBuild_MissingContextOrDockerfile(t *testing.T) {
	_, err := readBuildContext(&core.BuildSpec{Context: "/nonexistent/web"})
	require.ErrorContains(t, err, "build context /nonexistent/web")
	dir := writeTree(t, map[string]string{"app": "a"})
	_, err = readBuildContext(&core.BuildSpec{Context: dir})
	require.ErrorContains(t, err, "Dockerfile Dockerfile")
}

// TestBuild_Tag: gordon/<app>-<service>:<16 hex digits of the hash>.
func TestBuild_Tag(t *testing.T) {
	assert.Equal(t, "gordon/shop-web:0123456789abcdef", BuiltTag("gordon", "shop", "web", "0123456789abcdef0123"))
	assert.Equal(t, "127.0.0.1:5000/team/shop-web:0123456789abcdef", BuiltTag("127.0.0.1:5000/team", "shop", "web", "0123456789abcdef0123"))
}

// TestBuild_FollowerNamesTheFailingStep: each step is one progress line;
// a failure names the step it happened in and keeps the last output lines.
func TestBuild_FollowerNamesTheFailingStep(t *testing.T) {
	stream := `{"stream":"Step 1/3 : FROM scratch\n"}
{"stream":" ---\u003e \n"}
{"stream":"Step 2/3 : COPY missing /missing\n"}
{"errorDetail":{"message":"COPY failed: file not found in build context"},"error":"COPY failed: file not found in build context"}
`
	var progress bytes.Buffer
	f := &buildFollower{service: "web", progress: &progress}
	err := f.follow(strings.NewReader(stream))
	require.EqualError(t, err, "service web: build failed at Step 2/3 : COPY missing /missing: COPY failed: file not found in build context")
	assert.Equal(t, "build web: Step 1/3 : FROM scratch\nbuild web: Step 2/3 : COPY missing /missing\n", progress.String())
	assert.Equal(t, []string{"Step 1/3 : FROM scratch", " ---> ", "Step 2/3 : COPY missing /missing"}, f.tail)
}

// TestBuild_PlanSetsTagsWithoutBuilding: a dry run (and validate) replaces
// each build with its tag, or with image when the service names one, and
// talks to no engine.
func TestBuild_PlanSetsTagsWithoutBuilding(t *testing.T) {
	dir := writeTree(t, map[string]string{"Dockerfile": "FROM scratch\n"})
	spec := core.AppSpec{Name: "shop", Services: []core.ServiceSpec{
		{Name: "web", Build: &core.BuildSpec{Context: dir}},
		{Name: "api", Image: "shop/api:1", Build: &core.BuildSpec{Context: dir}},
		{Name: "db", Image: "postgres:16"},
	}}
	built, err := Resolve(t.Context(), nil, &spec, Plan, nil, nil)
	require.NoError(t, err)
	require.Len(t, built, 2)
	assert.Regexp(t, `^gordon/shop-web:[0-9a-f]{16}$`, spec.Services[0].Image)
	assert.Equal(t, "shop/api:1", spec.Services[1].Image)
	assert.Equal(t, "postgres:16", spec.Services[2].Image)
	assert.NotNil(t, spec.Services[0].Build, "a plan keeps the build: the image is built on deploy, not pulled")
	assert.NotNil(t, spec.Services[1].Build)
}
