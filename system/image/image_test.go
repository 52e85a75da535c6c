package image

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

const helloSrc = `package main

import (
	"fmt"
	"os"
)

var nonce = "unset"

func main() {
	fi, err := os.Stat("/tmp")
	if err != nil {
		fmt.Println("no /tmp:", err)
		os.Exit(3)
	}
	fmt.Printf("hello %s tmp=%v\n", nonce, fi.Mode())
}
`

// buildHello compiles a tiny static program stamped with nonce into dir.
func buildHello(t *testing.T, dir, nonce string) string {
	t.Helper()
	src := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(src, []byte(helloSrc), 0o644))
	out := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.nonce="+nonce, "-o", out, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GO111MODULE=off")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", b)
	return out
}

func engine(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Skipf("Docker engine not available: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func removeImage(t *testing.T, ref string) {
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", ref).Run() })
}

// TestBuild_FromScratchImageRunsBinaryWithTmp: the
// image is built locally FROM scratch from a static binary (no registry),
// the single binary is the entrypoint, /tmp exists with mode 1777, labels
// are applied, and a second Build finds the tag and builds nothing.
func TestBuild_FromScratchImageRunsBinaryWithTmp(t *testing.T) {
	cli := engine(t)
	nonce := uuid.NewString()[:8]
	bin := buildHello(t, t.TempDir(), nonce)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	img, err := Build(ctx, cli, "sysimage-test", map[string]string{"/bin/hello": bin}, map[string]string{"dev.gordon.test": nonce})
	require.NoError(t, err)
	removeImage(t, img.Ref)
	assert.True(t, img.Built)
	assert.True(t, strings.HasPrefix(img.Ref, "gordon-system/sysimage-test:"), img.Ref)
	assert.Len(t, img.Hash, 16)
	assert.True(t, strings.HasPrefix(img.ID, "sha256:"), img.ID)

	ins, err := cli.ImageInspect(ctx, img.Ref)
	require.NoError(t, err)
	assert.Equal(t, img.ID, ins.ID)
	require.NotNil(t, ins.Config)
	assert.Equal(t, nonce, ins.Config.Labels["dev.gordon.test"])
	assert.Equal(t, "sysimage-test", ins.Config.Labels["dev.gordon.system-image"])
	assert.Equal(t, []string{"/bin/hello"}, ins.Config.Entrypoint)

	out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", img.Ref).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "hello "+nonce+" tmp=dtrwxrwxrwx\n", string(out))

	again, err := Build(ctx, cli, "sysimage-test", map[string]string{"/bin/hello": bin}, nil)
	require.NoError(t, err)
	assert.False(t, again.Built, "an existing tag is reused")
	assert.Equal(t, img.ID, again.ID)
	assert.Equal(t, img.Ref, again.Ref)
}

// TestBuild_DifferentBinaryDifferentTag: the tag follows the binaries'
// content, so a new binary gets a new image (system containers are
// replaced when their image changes).
func TestBuild_DifferentBinaryDifferentTag(t *testing.T) {
	cli := engine(t)
	dir := t.TempDir()
	a := buildHello(t, filepath.Join(mkdir(t, dir, "a")), "a-"+uuid.NewString()[:8])
	b := buildHello(t, filepath.Join(mkdir(t, dir, "b")), "b-"+uuid.NewString()[:8])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ia, err := Build(ctx, cli, "sysimage-test", map[string]string{"/hello": a}, nil)
	require.NoError(t, err)
	removeImage(t, ia.Ref)
	ib, err := Build(ctx, cli, "sysimage-test", map[string]string{"/hello": b}, nil)
	require.NoError(t, err)
	removeImage(t, ib.Ref)
	assert.NotEqual(t, ia.Hash, ib.Hash)
	assert.NotEqual(t, ia.ID, ib.ID)

	// Two binaries: no entrypoint, both present.
	two, err := Build(ctx, cli, "sysimage-test", map[string]string{"/a/hello": a, "/b/hello": b}, nil)
	require.NoError(t, err)
	removeImage(t, two.Ref)
	out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", "--entrypoint", "/b/hello", two.Ref).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.True(t, strings.HasPrefix(string(out), "hello b-"), "%s", out)
}

func mkdir(t *testing.T, parent, name string) string {
	d := filepath.Join(parent, name)
	require.NoError(t, os.MkdirAll(d, 0o755))
	return d
}

// TestBuild_InvalidInputs: bad names, paths and missing binaries are
// core.ErrInvalid and never reach the engine.
func TestBuild_InvalidInputs(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "x")
	require.NoError(t, os.WriteFile(bin, []byte("x"), 0o755))
	cases := []struct {
		name string
		bins map[string]string
	}{
		{"Bad/Name", map[string]string{"/x": bin}},
		{"", map[string]string{"/x": bin}},
		{"ok", nil},
		{"ok", map[string]string{"relative": bin}},
		{"ok", map[string]string{"/tmp/x": bin}},
		{"ok", map[string]string{"/a/../x": bin}},
		{"ok", map[string]string{"/x": filepath.Join(t.TempDir(), "missing")}},
	}
	for _, c := range cases {
		_, err := Build(context.Background(), nopClient{t}, c.name, c.bins, nil)
		require.Error(t, err, "%q %v", c.name, c.bins)
		assert.ErrorIs(t, err, core.ErrInvalid, "%q %v", c.name, c.bins)
	}
}

// nopClient fails the test if the engine is reached.
type nopClient struct{ t *testing.T }

func (c nopClient) ImageInspect(context.Context, string, ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	c.t.Fatal("engine reached")
	return client.ImageInspectResult{}, nil
}

func (c nopClient) ImageBuild(context.Context, io.Reader, client.ImageBuildOptions) (client.ImageBuildResult, error) {
	c.t.Fatal("engine reached")
	return client.ImageBuildResult{}, nil
}
