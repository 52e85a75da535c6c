package testimages_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/runtime/docker"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

const labelRun = "dev.gordon.test-run"

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func runtimeT(t *testing.T) *docker.Runtime {
	t.Helper()
	if err := testimages.Available(ctxT(t, 10*time.Second)); err != nil {
		t.Skipf("Docker engine not available: %v", err)
	}
	r, err := docker.NewFromEnv()
	require.NoError(t, err)
	run := t.Name()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := r.Client().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelRun+"="+run)})
		if err == nil {
			for _, c := range res.Items {
				_, _ = r.Client().ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
			}
		}
		_ = r.Close()
	})
	return r
}

// untag removes the version tag ref at the end of the test (the content
// tag keeps the image).
func untag(t *testing.T, r *docker.Runtime, ref string) {
	t.Cleanup(func() {
		_, _ = r.Client().ImageRemove(context.Background(), ref, client.ImageRemoveOptions{})
	})
}

// start runs image with env, publishing port on loopback, and returns the
// container ID and its base address.
func start(t *testing.T, r *docker.Runtime, image string, port int, env ...string) (string, string) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	id, err := r.CreateContainer(ctx, core.ContainerSpec{
		Name:   fmt.Sprintf("gordon-testimages-%d", time.Now().UnixNano()),
		Image:  image,
		Env:    env,
		Labels: map[string]string{labelRun: t.Name()},
		Ports:  []core.PortSpec{{Port: port, Protocol: "tcp"}},
	})
	require.NoError(t, err)
	require.NoError(t, r.StartContainer(ctx, id))
	binds, err := r.BackendBinds(ctx, id, []core.PortSpec{{Port: port, Protocol: "tcp"}})
	if err != nil {
		return id, ""
	}
	return id, fmt.Sprintf("127.0.0.1:%d", binds[0].HostPort)
}

// waitGet GETs url until the server answers (any status) or 10 s pass.
func waitGet(t *testing.T, url string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	var code int
	var body string
	get := func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		code, body = resp.StatusCode, string(b)
		return nil
	}
	if !assert.Eventually(t, func() bool { return get() == nil }, 10*time.Second, 100*time.Millisecond) {
		t.Fatalf("GET %s: %v", url, get())
	}
	return code, body
}

func TestBuild_VersionTagTmpAndEntrypoint(t *testing.T) {
	refs := testimages.Require(t, "vtest", "httpd")
	require.Equal(t, map[string]string{"httpd": "gordon-test/httpd:vtest"}, refs)
	r := runtimeT(t)
	untag(t, r, refs["httpd"])
	ctx := ctxT(t, 30*time.Second)
	img, err := r.Client().ImageInspect(ctx, refs["httpd"])
	require.NoError(t, err)
	assert.Contains(t, img.Config.Env, "VERSION=vtest")
	assert.Equal(t, []string{"/httpd"}, img.Config.Entrypoint)
	assert.Empty(t, img.RepoDigests, "built locally, no registry digest")

	// FROM scratch has no /tmp: the image must bring one, world-writable and sticky.
	id, err := r.CreateContainer(ctx, core.ContainerSpec{Name: fmt.Sprintf("gordon-testimages-tmp-%d", time.Now().UnixNano()), Image: refs["httpd"], Labels: map[string]string{labelRun: t.Name()}})
	require.NoError(t, err)
	st, err := r.Client().ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: "/tmp"})
	require.NoError(t, err)
	assert.True(t, st.Stat.Mode.IsDir())
	assert.Equal(t, os.FileMode(0o777), st.Stat.Mode.Perm())
	assert.NotZero(t, st.Stat.Mode&os.ModeSticky)
}

func TestBuild_CachedByContentHash(t *testing.T) {
	ctx := ctxT(t, 5*time.Minute)
	first := testimages.Require(t, "", "tcpecho")
	require.True(t, strings.HasPrefix(first["tcpecho"], "gordon-test/tcpecho:c-"), first["tcpecho"])
	r := runtimeT(t)
	img1, err := r.Client().ImageInspect(ctx, first["tcpecho"])
	require.NoError(t, err)

	second, err := testimages.Build(ctx, "tcpecho")
	require.NoError(t, err)
	assert.Equal(t, first, second)
	img2, err := r.Client().ImageInspect(ctx, second["tcpecho"])
	require.NoError(t, err)
	assert.Equal(t, img1.ID, img2.ID, "no rebuild")
	assert.Equal(t, img1.Created, img2.Created)

	// A different version is different content.
	v, err := testimages.BuildVersion(ctx, "vcache", "tcpecho")
	require.NoError(t, err)
	untag(t, r, v["tcpecho"])
	imgV, err := r.Client().ImageInspect(ctx, v["tcpecho"])
	require.NoError(t, err)
	assert.NotEqual(t, img1.ID, imgV.ID)
}

func TestBuild_UnknownWorkload(t *testing.T) {
	_, err := testimages.Build(context.Background(), "httpd", "nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown workload "nope"`)
	_, err = testimages.BuildVersion(context.Background(), "bad version", "httpd")
	assert.Error(t, err)
}

func TestWorkload_HTTPDNeverReadyAndSlow(t *testing.T) {
	refs := testimages.Require(t, "", "httpd")
	r := runtimeT(t)
	_, addr := start(t, r, refs["httpd"], 8080, "NEVER_READY=1", "VERSION=nr")
	code, _ := waitGet(t, "http://"+addr+"/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	code, body := waitGet(t, "http://"+addr+"/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "version=nr")
	begin := time.Now()
	code, body = waitGet(t, "http://"+addr+"/slow?d=600ms")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "version=nr")
	assert.GreaterOrEqual(t, time.Since(begin), 600*time.Millisecond)
}

func TestWorkload_HTTPDExitAtOnce(t *testing.T) {
	refs := testimages.Require(t, "", "httpd")
	r := runtimeT(t)
	id, _ := start(t, r, refs["httpd"], 8080, "EXIT_AT_ONCE=1")
	var st core.ContainerState
	require.Eventually(t, func() bool {
		var err error
		st, err = r.InspectContainer(context.Background(), id)
		return err == nil && st.Status == core.StatusExited
	}, 10*time.Second, 100*time.Millisecond)
	assert.Equal(t, 3, st.ExitCode)
}

// The drain delay keeps serving after SIGTERM; the in-flight request finishes.
func TestWorkload_HTTPDDrainsOnSIGTERM(t *testing.T) {
	refs := testimages.Require(t, "", "httpd")
	r := runtimeT(t)
	id, addr := start(t, r, refs["httpd"], 8080, "DRAIN_DELAY=1s")
	waitGet(t, "http://"+addr+"/healthz")

	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/slow?d=2s")
		if err != nil {
			done <- result{err: err}
			return
		}
		resp.Body.Close()
		done <- result{code: resp.StatusCode}
	}()
	// Settles: the container reports neither the slow request arrived nor
	// SIGTERM received, so there is no event to await for either.
	time.Sleep(300 * time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- r.StopContainer(context.Background(), id, 10*time.Second) }()
	time.Sleep(300 * time.Millisecond)
	// Still serving during the drain delay.
	code, _ := waitGet(t, "http://"+addr+"/")
	assert.Equal(t, http.StatusOK, code)

	res := <-done
	require.NoError(t, res.err)
	assert.Equal(t, http.StatusOK, res.code)
	require.NoError(t, <-stopped)
	st, err := r.InspectContainer(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, 0, st.ExitCode)
}
