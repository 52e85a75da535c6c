package docker

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// collectLogs returns the text of every line Logs delivers.
func collectLogs(t *testing.T, r *Runtime, id string, opts core.LogOptions) []core.LogLine {
	t.Helper()
	var lines []core.LogLine
	err := r.Logs(ctxT(t, 20*time.Second), id, opts, func(l core.LogLine) error {
		lines = append(lines, l)
		return nil
	})
	require.NoError(t, err)
	return lines
}

func texts(lines []core.LogLine) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Text
	}
	return out
}

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
func TestR17_CreateStartInspectAndBackendBinds(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	spec := f.httpdSpec("web", "VERSION=r17")
	spec.Hostname = "web-host"
	spec.RestartPolicy = "unless-stopped"
	spec.StopGrace = 1500 * time.Millisecond
	id, err := f.r.CreateContainer(ctx, spec)
	require.NoError(t, err)

	st, err := f.r.InspectContainer(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, core.StatusCreated, st.Status)
	assert.True(t, st.StartedAt.IsZero(), "never started: %v", st.StartedAt)
	assert.Equal(t, spec.Name, st.Name)
	assert.Equal(t, f.run, st.Labels[labelRun])
	assert.Contains(t, st.Env, "VERSION=r17")

	_, err = f.r.BackendBinds(ctx, id, spec.Ports)
	assert.ErrorIs(t, err, core.ErrConflict, "a created container has no binds yet")

	before := time.Now().Add(-2 * time.Second)
	require.NoError(t, f.r.StartContainer(ctx, id))
	st, err = f.r.InspectContainer(ctx, id)
	require.NoError(t, err)
	assert.True(t, st.Running())
	assert.True(t, st.StartedAt.After(before) && st.StartedAt.Before(time.Now().Add(2*time.Second)), "StartedAt %v", st.StartedAt)
	assert.Equal(t, "", st.Health)
	assert.False(t, st.HasHealthcheck)

	binds, err := f.r.BackendBinds(ctx, id, spec.Ports)
	require.NoError(t, err)
	require.Len(t, binds, 1)
	assert.Equal(t, 8080, binds[0].ContainerPort)
	assert.Equal(t, "tcp", binds[0].Protocol)
	assert.Greater(t, binds[0].HostPort, 0)

	code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", binds[0].HostPort))
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "version=r17")
	_, host := get(t, fmt.Sprintf("http://127.0.0.1:%d/hostname", binds[0].HostPort))
	assert.Equal(t, "web-host", strings.TrimSpace(host))

	// Published on loopback only, with the stop timeout and restart policy recorded.
	raw, err := f.r.Client().ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	for _, pbs := range raw.Container.NetworkSettings.Ports {
		for _, pb := range pbs {
			assert.Equal(t, "127.0.0.1", pb.HostIP.String())
		}
	}
	require.NotNil(t, raw.Container.Config.StopTimeout)
	assert.Equal(t, 2, *raw.Container.Config.StopTimeout, "1.5 s rounds up to 2 s")
	assert.Equal(t, "unless-stopped", string(raw.Container.HostConfig.RestartPolicy.Name))

	// A port that was never published is an error, not a zero port.
	_, err = f.r.BackendBinds(ctx, id, []core.PortSpec{{Port: 9999, Protocol: "tcp"}})
	assert.ErrorIs(t, err, core.ErrConflict)
}

// S26: the service command replaces the entrypoint and no image args remain.
func TestS26_CommandReplacesEntrypointWithoutArgs(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	spec := f.httpdSpec("cmd")
	spec.Command = []string{"/httpd", "-version=from-command", "-port=8081"}
	spec.Ports = []core.PortSpec{{Port: 8081, Protocol: "tcp"}}
	id := f.createStart(spec)

	raw, err := f.r.Client().ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, "/httpd", raw.Container.Path)
	assert.Equal(t, []string{"-version=from-command", "-port=8081"}, raw.Container.Args)
	assert.Empty(t, raw.Container.Config.Cmd)

	binds, err := f.r.BackendBinds(ctx, id, spec.Ports)
	require.NoError(t, err)
	_, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", binds[0].HostPort))
	assert.Contains(t, body, "version=from-command")
}

func TestRuntime_NetworkAliasesAndExtraNetworks(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	private, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("app"), Labels: f.labels()})
	require.NoError(t, err)
	shared, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("shared"), Labels: f.labels(), Internal: true})
	require.NoError(t, err)

	spec := f.httpdSpec("aliased")
	spec.Network = f.name("app")
	spec.Aliases = []string{"web"}
	spec.ExtraNetworks = []string{f.name("shared")}
	id := f.createStart(spec)

	raw, err := f.r.Client().ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	nets := raw.Container.NetworkSettings.Networks
	require.Contains(t, nets, f.name("app"))
	require.Contains(t, nets, f.name("shared"))
	assert.Equal(t, private, nets[f.name("app")].NetworkID)
	assert.Equal(t, shared, nets[f.name("shared")].NetworkID)
	assert.Contains(t, nets[f.name("app")].Aliases, "web")

	// Ports are still published on loopback with a private network.
	binds, err := f.r.BackendBinds(ctx, id, spec.Ports)
	require.NoError(t, err)
	code, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", binds[0].HostPort))
	assert.Equal(t, http.StatusOK, code)

	// A missing extra network fails creation and leaves no container behind.
	bad := f.httpdSpec("badnet")
	bad.Network = f.name("app")
	bad.ExtraNetworks = []string{f.name("missing")}
	_, err = f.r.CreateContainer(ctx, bad)
	assert.ErrorIs(t, err, core.ErrNotFound)
	left, err := f.r.ListManaged(ctx, map[string]string{labelRun: f.run, core.LabelService: "badnet"})
	require.NoError(t, err)
	assert.Empty(t, left)
}

func TestRuntime_EnsureNetworkAndVolumeAreIdempotent(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	// A network whose name contains ours must not be mistaken for it.
	longer, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("net-2"), Labels: f.labels()})
	require.NoError(t, err)
	id1, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("net"), Labels: f.labels("k", "v")})
	require.NoError(t, err)
	assert.NotEqual(t, longer, id1)
	id2, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("net"), Labels: f.labels("k", "v")})
	require.NoError(t, err)
	assert.Equal(t, id1, id2)
	nw, err := f.r.Client().NetworkInspect(ctx, id1, client.NetworkInspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, "bridge", nw.Network.Driver)
	assert.Equal(t, "v", nw.Network.Labels["k"])

	vs := core.VolumeSpec{Name: f.name("vol"), Labels: f.labels("k", "v")}
	require.NoError(t, f.r.EnsureVolume(ctx, vs))
	require.NoError(t, f.r.EnsureVolume(ctx, vs))
	vol, err := f.r.Client().VolumeInspect(ctx, vs.Name, client.VolumeInspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, "v", vol.Volume.Labels["k"])

	_, err = f.r.EnsureNetwork(ctx, core.NetworkSpec{})
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorIs(t, f.r.EnsureVolume(ctx, core.VolumeSpec{}), core.ErrInvalid)
}

// R3: data in a volume survives the container's removal and is seen by
// its replacement; RemoveContainer never removes volumes.
func TestR3_VolumeDataSurvivesRemoval(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 60*time.Second)
	vol := f.name("data")
	require.NoError(t, f.r.EnsureVolume(ctx, core.VolumeSpec{Name: vol, Labels: f.labels()}))
	spec := func(suffix string) core.ContainerSpec {
		return core.ContainerSpec{
			Name:   f.name(suffix),
			Image:  f.images["kv"],
			Labels: f.labels(core.LabelService, "db"),
			Ports:  []core.PortSpec{{Port: 8080, Protocol: "tcp"}},
			Mounts: []core.Mount{{Type: core.MountVolume, Source: vol, Target: "/data"}},
		}
	}
	first := f.createStart(spec("db1"))
	binds, err := f.r.BackendBinds(ctx, first, []core.PortSpec{{Port: 8080}})
	require.NoError(t, err)
	base := fmt.Sprintf("http://127.0.0.1:%d", binds[0].HostPort)
	get(t, base+"/healthz")
	req, err := http.NewRequest(http.MethodPut, base+"/k/greeting", strings.NewReader("hello"))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	// Without force a running container is a state conflict.
	assert.ErrorIs(t, f.r.RemoveContainer(ctx, first, false), core.ErrConflict)
	require.NoError(t, f.r.StopContainer(ctx, first, 5*time.Second))
	require.NoError(t, f.r.RemoveContainer(ctx, first, false))
	_, err = f.r.InspectContainer(ctx, first)
	assert.ErrorIs(t, err, core.ErrNotFound)
	_, err = f.r.Client().VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
	require.NoError(t, err, "volume must survive container removal")

	second := f.createStart(spec("db2"))
	binds, err = f.r.BackendBinds(ctx, second, []core.PortSpec{{Port: 8080}})
	require.NoError(t, err)
	code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/k/greeting", binds[0].HostPort))
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "hello", body)

	// Force removes a running container, still keeping the volume.
	require.NoError(t, f.r.RemoveContainer(ctx, second, true))
	_, err = f.r.Client().VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
	require.NoError(t, err)
}

// R25: StopContainer sends SIGTERM and kills after the grace.
func TestR25_StopKillsAfterGraceWhenSIGTERMIgnored(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 60*time.Second)
	stubborn := f.createStart(f.httpdSpec("stubborn", "IGNORE_SIGTERM=1"))
	polite := f.createStart(f.httpdSpec("polite"))
	for _, id := range []string{stubborn, polite} {
		binds, err := f.r.BackendBinds(ctx, id, []core.PortSpec{{Port: 8080}})
		require.NoError(t, err)
		get(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", binds[0].HostPort)) // serving, handlers installed
	}

	start := time.Now()
	require.NoError(t, f.r.StopContainer(ctx, stubborn, 2*time.Second))
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 1900*time.Millisecond, "killed before the grace")
	assert.Less(t, took, 15*time.Second)
	st, err := f.r.InspectContainer(ctx, stubborn)
	require.NoError(t, err)
	assert.Equal(t, core.StatusExited, st.Status)
	assert.Equal(t, 137, st.ExitCode, "SIGKILL")

	start = time.Now()
	require.NoError(t, f.r.StopContainer(ctx, polite, 20*time.Second))
	assert.Less(t, time.Since(start), 15*time.Second, "a SIGTERM-handling workload stops before its 20 s grace")
	st, err = f.r.InspectContainer(ctx, polite)
	require.NoError(t, err)
	assert.Equal(t, core.StatusExited, st.Status)
	assert.Equal(t, 0, st.ExitCode)

	// Stopping a stopped container succeeds.
	require.NoError(t, f.r.StopContainer(ctx, polite, time.Second))
}

func TestRuntime_RestartContainerNewExecution(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	id := f.createStart(f.httpdSpec("restart"))
	before, err := f.r.InspectContainer(ctx, id)
	require.NoError(t, err)
	require.NoError(t, f.r.RestartContainer(ctx, id, 5*time.Second))
	after, err := f.r.InspectContainer(ctx, id)
	require.NoError(t, err)
	assert.True(t, after.Running())
	assert.True(t, after.StartedAt.After(before.StartedAt), "%v !> %v", after.StartedAt, before.StartedAt)
}

func TestRuntime_LogsTailSinceAndCallbackError(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	id := f.createStart(f.httpdSpec("logs", "VERSION=logv"))
	binds, err := f.r.BackendBinds(ctx, id, []core.PortSpec{{Port: 8080}})
	require.NoError(t, err)
	get(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", binds[0].HostPort))
	require.NoError(t, f.r.StopContainer(ctx, id, 5*time.Second))

	all := collectLogs(t, f.r, id, core.LogOptions{})
	require.Equal(t, []string{"listening on :8080 (version logv)", "received terminated, draining for 0s", "stopped"}, texts(all))
	for _, l := range all {
		assert.Equal(t, "stderr", l.Stream) // the log package writes to stderr
		assert.False(t, l.Time.IsZero())
		assert.WithinDuration(t, time.Now(), l.Time, time.Minute)
	}

	tail := collectLogs(t, f.r, id, core.LogOptions{Tail: 1})
	assert.Equal(t, []string{"stopped"}, texts(tail))

	since := collectLogs(t, f.r, id, core.LogOptions{Since: all[1].Time})
	assert.Equal(t, []string{"received terminated, draining for 0s", "stopped"}, texts(since))

	none := collectLogs(t, f.r, id, core.LogOptions{Since: time.Now().Add(time.Hour)})
	assert.Empty(t, none)

	stop := errors.New("enough")
	calls := 0
	err = f.r.Logs(ctx, id, core.LogOptions{}, func(core.LogLine) error { calls++; return stop })
	assert.Same(t, stop, err)
	assert.Equal(t, 1, calls)
}

func TestRuntime_LogsFollowUntilContextDone(t *testing.T) {
	f := newFixture(t)
	id := f.createStart(f.httpdSpec("follow", "VERSION=fol"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	err := f.r.Logs(ctx, id, core.LogOptions{Follow: true}, func(l core.LogLine) error {
		got = append(got, l.Text)
		if strings.HasPrefix(l.Text, "listening on") {
			cancel()
		}
		return nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, got, "listening on :8080 (version fol)")
}

func TestRuntime_ListManagedByLabel(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	running := f.createStart(f.httpdSpec("a"))
	created, err := f.r.CreateContainer(ctx, f.httpdSpec("b"))
	require.NoError(t, err)

	all, err := f.r.ListManaged(ctx, map[string]string{labelRun: f.run})
	require.NoError(t, err)
	byID := map[string]core.ContainerState{}
	for _, c := range all {
		byID[c.ID] = c
	}
	require.Len(t, byID, 2)
	assert.Equal(t, core.StatusRunning, byID[running].Status)
	assert.False(t, byID[running].StartedAt.IsZero())
	assert.Equal(t, core.StatusCreated, byID[created].Status)
	assert.Equal(t, f.name("b"), byID[created].Name)

	one, err := f.r.ListManaged(ctx, map[string]string{labelRun: f.run, core.LabelService: "a"})
	require.NoError(t, err)
	require.Len(t, one, 1)
	assert.Equal(t, running, one[0].ID)

	none, err := f.r.ListManaged(ctx, map[string]string{labelRun: f.run, core.LabelService: "zzz"})
	require.NoError(t, err)
	assert.Empty(t, none)
}

// SPEC 1.3: "not found" is a distinct error class for every call by ID.
func TestRuntime_NotFoundIsDistinct(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	const bogus = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	_, err := f.r.InspectContainer(ctx, bogus)
	errs := map[string]error{"inspect": err}
	errs["start"] = f.r.StartContainer(ctx, bogus)
	errs["stop"] = f.r.StopContainer(ctx, bogus, time.Second)
	errs["restart"] = f.r.RestartContainer(ctx, bogus, time.Second)
	errs["remove"] = f.r.RemoveContainer(ctx, bogus, false)
	errs["remove-force"] = f.r.RemoveContainer(ctx, bogus, true)
	_, errs["binds"] = f.r.BackendBinds(ctx, bogus, []core.PortSpec{{Port: 80}})
	errs["logs"] = f.r.Logs(ctx, bogus, core.LogOptions{}, func(core.LogLine) error { return nil })
	_, errs["create-missing-image"] = f.r.CreateContainer(ctx, core.ContainerSpec{Name: f.name("noimg"), Image: "gordon-test/missing:none", Labels: f.labels()})
	for op, err := range errs {
		assert.ErrorIs(t, err, core.ErrNotFound, op)
		assert.NotErrorIs(t, err, core.ErrUnavailable, op)
	}
	assert.Contains(t, errs["inspect"].Error(), bogus[:12])
}

func TestRuntime_CreateRejectsBadSpec(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 10*time.Second)
	base := f.httpdSpec("bad")
	for name, mut := range map[string]func(*core.ContainerSpec){
		"protocol": func(s *core.ContainerSpec) { s.Ports = []core.PortSpec{{Port: 80, Protocol: "sctp"}} },
		"port":     func(s *core.ContainerSpec) { s.Ports = []core.PortSpec{{Port: 70000}} },
		"restart":  func(s *core.ContainerSpec) { s.RestartPolicy = "sometimes" },
		"mount":    func(s *core.ContainerSpec) { s.Mounts = []core.Mount{{Type: "nfs", Source: "x", Target: "/x"}} },
		"device":   func(s *core.ContainerSpec) { s.Devices = []string{"a:b:c:d"} },
	} {
		s := base
		mut(&s)
		_, err := f.r.CreateContainer(ctx, s)
		assert.ErrorIs(t, err, core.ErrInvalid, name)
	}
	// A taken name is a state conflict.
	_, err := f.r.CreateContainer(ctx, base)
	require.NoError(t, err)
	_, err = f.r.CreateContainer(ctx, base)
	assert.ErrorIs(t, err, core.ErrConflict)
}

func TestRuntime_ParseHelpers(t *testing.T) {
	dm, err := parseDevice("/dev/fuse")
	require.NoError(t, err)
	assert.Equal(t, "/dev/fuse", dm.PathInContainer)
	assert.Equal(t, "rwm", dm.CgroupPermissions)
	dm, err = parseDevice("/dev/sda:/dev/xvda:r")
	require.NoError(t, err)
	assert.Equal(t, "/dev/xvda", dm.PathInContainer)
	assert.Equal(t, "r", dm.CgroupPermissions)

	assert.Equal(t, 30, graceSeconds(0))
	assert.Equal(t, 1, graceSeconds(10*time.Millisecond))
	assert.Equal(t, 5, graceSeconds(5*time.Second))

	assert.True(t, parseEngineTime("0001-01-01T00:00:00Z").IsZero())
	assert.True(t, parseEngineTime("").IsZero())
	assert.Equal(t, 2026, parseEngineTime("2026-11-30T00:56:03.123456789Z").Year())

	l := parseLogLine("2026-11-30T00:56:03.123456789Z hello world")
	assert.Equal(t, "hello world", l.Text)
	assert.Equal(t, 123456789, l.Time.Nanosecond())
	l = parseLogLine("no timestamp")
	assert.Equal(t, "no timestamp", l.Text)
	assert.True(t, l.Time.IsZero())
}

// S9: TCP and UDP ports are both published on loopback and both read back.
func TestS9_TCPAndUDPBindsBothRead(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	spec := f.httpdSpec("mixed")
	spec.Ports = []core.PortSpec{{Port: 8080, Protocol: "tcp"}, {Port: 28015, Protocol: "udp"}}
	id := f.createStart(spec)
	binds, err := f.r.BackendBinds(ctx, id, spec.Ports)
	require.NoError(t, err)
	require.Len(t, binds, 2)
	assert.Equal(t, core.BackendBind{ContainerPort: 8080, HostPort: binds[0].HostPort, Protocol: "tcp"}, binds[0])
	assert.Equal(t, core.BackendBind{ContainerPort: 28015, HostPort: binds[1].HostPort, Protocol: "udp"}, binds[1])
	assert.Greater(t, binds[1].HostPort, 0)
	// The TCP bind is not answered for UDP and vice versa: asking for a
	// protocol that was not published is an error.
	_, err = f.r.BackendBinds(ctx, id, []core.PortSpec{{Port: 8080, Protocol: "udp"}})
	assert.ErrorIs(t, err, core.ErrConflict)
}

func TestRuntime_TCPEchoWorkload(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	id := f.createStart(core.ContainerSpec{
		Name:   f.name("echo"),
		Image:  f.images["tcpecho"],
		Env:    []string{"VERSION=e1"},
		Labels: f.labels(),
		Ports:  []core.PortSpec{{Port: 9000, Protocol: "tcp"}},
	})
	binds, err := f.r.BackendBinds(ctx, id, []core.PortSpec{{Port: 9000, Protocol: "tcp"}})
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", binds[0].HostPort)
	var conn net.Conn
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			c.Close()
			return false
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "e1: ping\n" {
			c.Close()
			return false
		}
		conn = c
		return true
	}, 10*time.Second, 100*time.Millisecond)
	defer conn.Close()
}

func TestRuntime_HostNetworkPublishesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	spec := f.httpdSpec("hostnet")
	spec.HostNetwork = true
	spec.Network = "ignored"
	id, err := f.r.CreateContainer(ctx, spec)
	require.NoError(t, err)
	raw, err := f.r.Client().ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, "host", string(raw.Container.HostConfig.NetworkMode))
	assert.Empty(t, raw.Container.HostConfig.PortBindings)
}

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
