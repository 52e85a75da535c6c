package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/versions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// labelRun marks every object one test creates, so cleanup finds them by
// label (decision 12: never by name).
const labelRun = "dev.gordon.test-run"

var (
	imagesOnce sync.Once
	images     map[string]string
	imagesErr  error
)

// fixture is one test's runtime, images and run label.
type fixture struct {
	t      *testing.T
	r      *Runtime
	run    string
	images map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := NewFromEnv()
	require.NoError(t, err)
	if _, err := r.Info(ctx); err != nil {
		t.Skipf("Docker engine not available: %v", err)
	}
	imagesOnce.Do(func() {
		bctx, bcancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer bcancel()
		images, imagesErr = testimages.Build(bctx, "httpd", "kv", "tcpecho")
	})
	require.NoError(t, imagesErr, "build test images")

	b := make([]byte, 6)
	_, _ = rand.Read(b)
	f := &fixture{t: t, r: r, run: hex.EncodeToString(b), images: images}
	t.Cleanup(f.cleanup)
	return f
}

// name is a unique object name for this test.
func (f *fixture) name(suffix string) string { return "gordon-test-" + f.run + "-" + suffix }

func (f *fixture) labels(extra ...string) map[string]string {
	l := map[string]string{labelRun: f.run, core.LabelManaged: "true"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// cleanup removes every container, network and volume carrying this run's label.
func (f *fixture) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := f.r.Client()
	flt := make(client.Filters).Add("label", labelRun+"="+f.run)
	if res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: flt}); err == nil {
		for _, c := range res.Items {
			_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		}
	}
	if res, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: flt}); err == nil {
		for _, n := range res.Items {
			_, _ = cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		}
	}
	if res, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: flt}); err == nil {
		for _, v := range res.Items {
			_, _ = cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		}
	}
	_ = f.r.Close()
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// httpdSpec is a started-able httpd container publishing 8080/tcp.
func (f *fixture) httpdSpec(suffix string, env ...string) core.ContainerSpec {
	return core.ContainerSpec{
		Name:      f.name(suffix),
		Image:     f.images["httpd"],
		Env:       env,
		Labels:    f.labels(core.LabelService, suffix),
		Ports:     []core.PortSpec{{Port: 8080, Protocol: "tcp"}},
		StopGrace: 5 * time.Second,
	}
}

func (f *fixture) createStart(spec core.ContainerSpec) string {
	f.t.Helper()
	ctx := ctxT(f.t, 30*time.Second)
	id, err := f.r.CreateContainer(ctx, spec)
	require.NoError(f.t, err)
	require.NoError(f.t, f.r.StartContainer(ctx, id))
	return id
}

// get fetches url, retrying until the server answers or 10 s pass.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	var code int
	var body string
	try := func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		code, body = resp.StatusCode, string(b)
		return nil
	}
	if !assert.Eventually(t, func() bool { return try() == nil }, 10*time.Second, 100*time.Millisecond) {
		t.Fatalf("GET %s: %v", url, try())
	}
	return code, body
}

// collectLogs returns the text of every line Logs delivers.
func TestRuntime_InfoNegotiatesAPIVersion(t *testing.T) {
	f := newFixture(t)
	info, err := f.r.Info(ctxT(t, 10*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "docker", info.Name)
	assert.NotEmpty(t, info.Version)
	require.NotEmpty(t, info.APIVersion)
	// The client downgraded to the engine's version (1.41 on Docker 20.10),
	// never above it, and never below the client's floor.
	used := f.r.APIVersion()
	assert.True(t, versions.LessThanOrEqualTo(used, info.APIVersion), "client %s > engine %s", used, info.APIVersion)
	assert.True(t, versions.GreaterThanOrEqualTo(used, client.MinAPIVersion), "client %s", used)
}

func TestRuntime_PinnedAPIVersion141(t *testing.T) {
	newFixture(t) // skips without an engine
	r, err := New(Options{FromEnv: true, APIVersion: "1.41"})
	require.NoError(t, err)
	defer r.Close()
	info, err := r.Info(ctxT(t, 10*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "1.41", r.APIVersion())
	assert.NotEmpty(t, info.Version)
}

func TestRuntime_UnreachableEngineIsUnavailable(t *testing.T) {
	r, err := New(Options{Host: "unix:///nonexistent/gordon-docker.sock"})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Info(ctxT(t, 5*time.Second))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.NotErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "docker info")
	t.Log(err)
	_, err = r.InspectContainer(ctxT(t, 5*time.Second), "abc")
	assert.ErrorIs(t, err, core.ErrUnavailable)
}

// Decision 15: a local image without a registry digest is pinned by its ID.
func TestRuntime_ResolveImageLocal(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 10*time.Second)
	ref, err := f.r.ResolveImage(ctx, f.images["httpd"])
	require.NoError(t, err)
	assert.True(t, ref.Local)
	assert.True(t, strings.HasPrefix(ref.ID, "sha256:"), ref.ID)
	assert.Equal(t, ref.ID, ref.Digest)
	assert.Equal(t, ref.ID, ref.Ref)

	// The pinned ref is usable as is.
	again, err := f.r.ResolveImage(ctx, ref.Ref)
	require.NoError(t, err)
	assert.Equal(t, ref.ID, again.ID)

	_, err = f.r.ResolveImage(ctx, "gordon-test/does-not-exist:nope")
	assert.ErrorIs(t, err, core.ErrNotFound)
}

func TestRuntime_PickRepoDigest(t *testing.T) {
	ds := []string{"other/x@sha256:aaa", "registry.example/blog@sha256:bbb"}
	assert.Equal(t, "registry.example/blog@sha256:bbb", pickRepoDigest("registry.example/blog:1.4", ds))
	assert.Equal(t, "other/x@sha256:aaa", pickRepoDigest("unrelated:1", ds))
	assert.Equal(t, "nginx@sha256:ccc", pickRepoDigest("nginx", []string{"nginx@sha256:ccc"}))
	assert.Equal(t, "", pickRepoDigest("nginx", nil))
}

// R17.1, R17.4, R17.5: create, start, inspect the start time, read the
// loopback binds and reach the workload through them.
func TestRuntime_PullFromUnreachableRegistryIsUnavailable(t *testing.T) {
	f := newFixture(t)
	err := f.r.PullImage(ctxT(t, 30*time.Second), "127.0.0.1:1/gordon/nothing:latest")
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.ErrorIs(t, f.r.PullImage(ctxT(t, 5*time.Second), "Not A Ref!"), core.ErrInvalid)
	assert.ErrorIs(t, f.r.PullImage(ctxT(t, 5*time.Second), "Not A Ref!"), core.ErrInvalid)
}

// fakeEngine answers /_ping with the given API version and /version with a
// canned body, like an engine of that version would.
func fakeEngine(t *testing.T, apiVersion string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", apiVersion)
		if strings.HasSuffix(r.URL.Path, "/version") {
			fmt.Fprintf(w, `{"Version":"fake","ApiVersion":%q,"Os":"linux","Arch":"amd64"}`, apiVersion)
			return
		}
		fmt.Fprint(w, "OK")
	}))
	t.Cleanup(srv.Close)
	return "tcp://" + strings.TrimPrefix(srv.URL, "http://")
}

func TestRuntime_OldEngineRefusedClearly(t *testing.T) {
	r, err := New(Options{Host: fakeEngine(t, "1.39")})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Info(ctxT(t, 5*time.Second))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "API 1.39")
	assert.Contains(t, err.Error(), client.MinAPIVersion)
}

func TestRuntime_NegotiatesDownTo141(t *testing.T) {
	r, err := New(Options{Host: fakeEngine(t, "1.41")})
	require.NoError(t, err)
	defer r.Close()
	info, err := r.Info(ctxT(t, 5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "1.41", info.APIVersion)
	assert.Equal(t, "1.41", r.APIVersion())
}
