package sdktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

var t0 = time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC)

// ARCHITECTURE §4 Runtime: every method crosses the wire with its
// arguments and results intact.
func TestArch4_RuntimeEveryMethodRoundTrips(t *testing.T) {
	fake := &recRuntime{
		info:  core.RuntimeInfo{Name: "docker", Version: "20.10", APIVersion: "1.41", OS: "linux", Arch: "amd64"},
		image: core.ImageRef{Ref: "sha256:abc", Digest: "sha256:abc", Local: true, ID: "sha256:abc"},
		state: core.ContainerState{
			ID: "c1", Name: "gordon-blog-web-1234abcd", Image: "sha256:abc", Status: core.StatusExited,
			StartedAt: t0, Health: "unhealthy", HasHealthcheck: true, ExitCode: 137,
			Env: []string{"A=1", "B=2"}, Labels: map[string]string{core.LabelApp: "blog"},
		},
		binds: []core.BackendBind{{ContainerPort: 8080, HostPort: 8080, Protocol: "tcp", IP: "10.88.0.7", Network: "gordon-blog"}, {ContainerPort: 53, HostPort: 32769, Protocol: "udp"}},
		list:  []core.ContainerState{{ID: "a", Status: core.StatusRunning}, {ID: "b", Status: core.StatusCreated}},
	}
	rt := sdktest.ServeRuntime(t, fake)
	ctx := context.Background()

	info, err := rt.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, fake.info, info)

	img, err := rt.ResolveImage(ctx, "blog:1.4")
	require.NoError(t, err)
	assert.Equal(t, fake.image, img)
	assert.Equal(t, []any{"blog:1.4"}, fake.args("ResolveImage"))

	require.NoError(t, rt.PullImage(ctx, "blog:1.5"))
	assert.Equal(t, []any{"blog:1.5"}, fake.args("PullImage"))

	net := core.NetworkSpec{Name: "gordon-blog", Labels: map[string]string{"x": "y"}, Internal: true}
	nid, err := rt.EnsureNetwork(ctx, net)
	require.NoError(t, err)
	assert.Equal(t, "net-gordon-blog", nid)
	assert.Equal(t, []any{net}, fake.args("EnsureNetwork"))

	vol := core.VolumeSpec{Name: "blog-data", Labels: map[string]string{"k": "v"}}
	require.NoError(t, rt.EnsureVolume(ctx, vol))
	assert.Equal(t, []any{vol}, fake.args("EnsureVolume"))

	spec := core.ContainerSpec{
		Name: "gordon-blog-web-1234abcd", Image: "sha256:abc", Command: []string{"/app", "--port=8080"},
		Env: []string{"A=1"}, Labels: map[string]string{core.LabelManaged: "true"}, Hostname: "web",
		Network: "gordon-blog", Aliases: []string{"web"}, ExtraNetworks: []string{"shared"},
		Ports:   []core.PortSpec{{Port: 8080, Protocol: "tcp"}, {Port: 53, Protocol: "udp"}},
		Mounts:  []core.Mount{{Type: core.MountVolume, Source: "data", Target: "/data"}, {Type: core.MountBind, Source: "/etc/app", Target: "/etc/app", ReadOnly: true}},
		Devices: []string{"/dev/null"}, StopGrace: 45 * time.Second, RestartPolicy: "unless-stopped", HostNetwork: true,
	}
	cid, err := rt.CreateContainer(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, "id-"+spec.Name, cid)
	assert.Equal(t, []any{spec}, fake.args("CreateContainer"))

	require.NoError(t, rt.StartContainer(ctx, "c1"))
	assert.Equal(t, []any{"c1"}, fake.args("StartContainer"))
	require.NoError(t, rt.StopContainer(ctx, "c1", 7*time.Second))
	assert.Equal(t, []any{"c1", 7 * time.Second}, fake.args("StopContainer"))
	require.NoError(t, rt.StopContainer(ctx, "c2", 0))
	assert.Equal(t, []any{"c2", time.Duration(0)}, fake.args("StopContainer"), "zero grace stays zero (R25 default)")
	require.NoError(t, rt.RemoveContainer(ctx, "c1", true))
	assert.Equal(t, []any{"c1", true}, fake.args("RemoveContainer"))
	require.NoError(t, rt.RestartContainer(ctx, "c1", 3*time.Second))
	assert.Equal(t, []any{"c1", 3 * time.Second}, fake.args("RestartContainer"))

	st, err := rt.InspectContainer(ctx, "c1")
	require.NoError(t, err)
	assert.Equal(t, fake.state, st)

	ports := []core.PortSpec{{Port: 8080, Protocol: "tcp"}}
	binds, err := rt.BackendBinds(ctx, "c1", ports)
	require.NoError(t, err)
	assert.Equal(t, fake.binds, binds)
	assert.Equal(t, []any{"c1", ports}, fake.args("BackendBinds"))

	labels := map[string]string{core.LabelManaged: "true", core.LabelApp: "blog"}
	list, err := rt.ListManaged(ctx, labels)
	require.NoError(t, err)
	assert.Equal(t, fake.list, list)
	assert.Equal(t, []any{labels}, fake.args("ListManaged"))
}

// A never-started container has a zero StartedAt on both sides.
func TestArch4_ZeroStartTimeStaysZero(t *testing.T) {
	fake := &recRuntime{state: core.ContainerState{ID: "c1", Status: core.StatusCreated}}
	st, err := sdktest.ServeRuntime(t, fake).InspectContainer(context.Background(), "c1")
	require.NoError(t, err)
	assert.True(t, st.StartedAt.IsZero())
}

// STYLE 4: every core class survives the wire, the message is kept, and
// an unclassified error matches no class.
func TestStyle4_ErrorClassesSurviveTheWire(t *testing.T) {
	classes := []error{core.ErrNotFound, core.ErrConflict, core.ErrInvalid, core.ErrUnavailable, core.ErrPluginExited, context.Canceled, context.DeadlineExceeded}
	for _, class := range classes {
		t.Run(class.Error(), func(t *testing.T) {
			orig := fmt.Errorf("container %q of app %q: %w", "c1", "blog", class)
			rt := sdktest.ServeRuntime(t, &recRuntime{err: orig})
			err := rt.StartContainer(context.Background(), "c1")
			require.Error(t, err)
			assert.ErrorIs(t, err, class)
			assert.Equal(t, orig.Error(), err.Error())
			for _, other := range classes {
				if other != class {
					assert.NotErrorIs(t, err, other)
				}
			}
		})
	}
	t.Run("unclassified", func(t *testing.T) {
		rt := sdktest.ServeRuntime(t, &recRuntime{err: errors.New("disk on fire")})
		err := rt.PullImage(context.Background(), "x")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "disk on fire")
		for _, class := range classes {
			assert.NotErrorIs(t, err, class)
		}
	})
}

// SPEC 1.3: runtime "not found" is distinct for every container method.
func TestSpec1_3_NotFoundIsDistinctOnEveryContainerMethod(t *testing.T) {
	rt := sdktest.ServeRuntime(t, &recRuntime{err: fmt.Errorf("no such container: %w", core.ErrNotFound)})
	ctx := context.Background()
	_, err := rt.InspectContainer(ctx, "gone")
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.ErrorIs(t, rt.StartContainer(ctx, "gone"), core.ErrNotFound)
	assert.ErrorIs(t, rt.StopContainer(ctx, "gone", time.Second), core.ErrNotFound)
	assert.ErrorIs(t, rt.RemoveContainer(ctx, "gone", false), core.ErrNotFound)
	assert.ErrorIs(t, rt.RestartContainer(ctx, "gone", time.Second), core.ErrNotFound)
	_, err = rt.BackendBinds(ctx, "gone", nil)
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.ErrorIs(t, rt.Logs(ctx, "gone", core.LogOptions{}, func(core.LogLine) error { return nil }), core.ErrNotFound)
	_, err = rt.ResolveImage(ctx, "nope:1")
	assert.ErrorIs(t, err, core.ErrNotFound)
}

func TestArch4_LogsStreamsEveryLineInOrder(t *testing.T) {
	lines := []core.LogLine{
		{Time: t0, Stream: "stdout", Text: "starting"},
		{Time: t0.Add(time.Second), Stream: "stderr", Text: "warn: x"},
		{Time: t0.Add(2 * time.Second), Stream: "stdout", Text: "ready"},
	}
	fake := &recRuntime{lines: lines}
	rt := sdktest.ServeRuntime(t, fake)
	opts := core.LogOptions{Since: t0, Tail: 10}
	var got []core.LogLine
	require.NoError(t, rt.Logs(context.Background(), "c1", opts, func(l core.LogLine) error {
		got = append(got, l)
		return nil
	}))
	assert.Equal(t, lines, got)
	assert.Equal(t, []any{"c1", opts}, fake.args("Logs"))
}

// An error from fn ends the stream, is returned as is, and the plugin
// side sees its stream end.
func TestArch4_LogsCallbackErrorStopsTheStream(t *testing.T) {
	fake := &recRuntime{
		lines:     []core.LogLine{{Text: "1"}, {Text: "2"}, {Text: "3"}},
		follow:    true,
		logsEnded: make(chan error, 1),
	}
	rt := sdktest.ServeRuntime(t, fake)
	stop := errors.New("seen enough")
	n := 0
	err := rt.Logs(context.Background(), "c1", core.LogOptions{Follow: true}, func(core.LogLine) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	assert.Same(t, stop, err)
	assert.Equal(t, 2, n)
	select {
	case serverErr := <-fake.logsEnded:
		assert.Error(t, serverErr, "server-side Logs must end when the client stops reading")
	case <-time.After(5 * time.Second):
		t.Fatal("server-side Logs still running after the client returned")
	}
}

// Cancelling the caller's context ends a follow stream on both sides and
// returns the context's error.
func TestArch4_LogsFollowEndsOnContextCancel(t *testing.T) {
	fake := &recRuntime{lines: []core.LogLine{{Text: "hello"}}, follow: true, logsEnded: make(chan error, 1)}
	rt := sdktest.ServeRuntime(t, fake)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- rt.Logs(ctx, "c1", core.LogOptions{Follow: true}, func(core.LogLine) error { cancel(); return nil })
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Logs did not return after cancel")
	}
	select {
	case err := <-fake.logsEnded:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("server-side Logs not cancelled")
	}
}

func TestArch4_ProbeEveryMethodRoundTrips(t *testing.T) {
	fake := &recProbe{res: core.ProbeResult{Ready: false, Detail: "HTTP 503 from http://127.0.0.1:32768/healthz"}, problems: []string{"url: required"}}
	p := sdktest.ServeProbe(t, fake)
	ctx := context.Background()

	info, err := p.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, core.ProbeInfo{Name: "rec", Protocol: 1, ConfigSchema: `{"type":"object"}`, Version: "0.1"}, info)

	problems, err := p.ValidateConfig(ctx, json.RawMessage(`{"a":1}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"url: required"}, problems)
	assert.JSONEq(t, `{"a":1}`, string(fake.config))

	req := core.ProbeRequest{
		Target: core.ProbeTarget{
			App: "blog", Service: "web", ContainerID: "c1", Address: "127.0.0.1:32768", Port: 8080, StartedAt: t0, Host: "blog.example.com",
			HTTP: []core.HTTPInterface{{Port: 8080, Host: "blog.example.com", Visibility: core.VisibilityPublic}, {Port: 9090, Visibility: core.VisibilityInternal}},
			TCP:  []core.L4Interface{{Port: 9000, Publish: "0.0.0.0:9000"}},
			UDP:  []core.L4Interface{{Port: 53, Publish: "0.0.0.0:53"}},
		},
		Readiness: core.Readiness{
			Type: core.ReadinessPlugin, Path: "/healthz", Port: 8080, Host: "h", Pattern: "ready", Plugin: "grpc",
			Config: map[string]any{"service": "x", "n": float64(3), "nested": map[string]any{"ok": true}}, Timeout: core.Duration(45 * time.Second),
		},
		Config:         json.RawMessage(`{"service":"x"}`),
		AttemptTimeout: 2 * time.Second,
	}
	res, err := p.Check(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, fake.res, res)
	fake.mu.Lock()
	defer fake.mu.Unlock()
	assert.Equal(t, req, fake.req)
}

// R32.3: a caller context that ends during Check is returned as is.
func TestR32_3_ProbeCheckReturnsCallerContextError(t *testing.T) {
	p := sdktest.ServeProbe(t, &recProbe{block: true})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Check(ctx, core.ProbeRequest{})
	assert.Equal(t, context.DeadlineExceeded, err, "got %v", err)
	assert.Less(t, time.Since(start), 3*time.Second)

	ctx2, cancel2 := context.WithCancel(context.Background())
	// A cancel while the call is under way: the plugin reports no event
	// for a Check begun, so the cancel comes after a short delay.
	go func() { time.Sleep(50 * time.Millisecond); cancel2() }()
	_, err = p.Check(ctx2, core.ProbeRequest{})
	assert.Equal(t, context.Canceled, err, "got %v", err)
}

func TestArch4_ProbeNotReadyIsNotAnError(t *testing.T) {
	p := sdktest.ServeProbe(t, &recProbe{res: core.ProbeResult{Ready: false, Detail: "connection refused"}})
	res, err := p.Check(context.Background(), core.ProbeRequest{})
	require.NoError(t, err)
	assert.False(t, res.Ready)
	assert.Equal(t, "connection refused", res.Detail)
}

func TestArch4_TrafficEveryMethodRoundTrips(t *testing.T) {
	status := core.TrafficStatus{
		AppliedGeneration: 42, Error: "listener 0.0.0.0:80: permission denied",
		Backends: []routetable.BackendStatus{{Addr: "127.0.0.1:32768", InFlight: 3, OpenConns: 5}},
	}
	fake := &recTraffic{gen: 42, status: status}
	tr := sdktest.ServeTraffic(t, fake)
	g := routetable.Graph{
		HTTP: []routetable.HTTPRoute{{Host: "blog.example.com", App: "blog", Service: "web", Backends: []routetable.Backend{
			{Addr: "127.0.0.1:32768", Container: "old"}, {Addr: "127.0.0.1:32770", Container: "new"}}},
			// R58: held and stopped routes cross the plugin boundary.
			{Host: "held.example.com", App: "blog", Service: "db", Hold: &routetable.Hold{Until: time.UnixMilli(1893456000123).UTC(), Queue: 7}},
			{Host: "stopped.example.com", App: "shop", Service: "web", Stopped: true}},
		TCP: []routetable.L4Route{{Listen: "0.0.0.0:9000", App: "blog", Service: "db", Backend: "127.0.0.1:32771", Container: "db1"},
			{Listen: "0.0.0.0:9001", App: "blog", Service: "db", Hold: &routetable.Hold{Until: time.UnixMilli(1893456000123).UTC()}}},
		UDP: []routetable.L4Route{{Listen: "0.0.0.0:53", App: "dns", Service: "dns", Backend: "127.0.0.1:32772"}},
	}
	gen, err := tr.Apply(context.Background(), g)
	require.NoError(t, err)
	assert.Equal(t, uint64(42), gen)
	fake.mu.Lock()
	assert.Equal(t, g, fake.graph)
	fake.mu.Unlock()

	st, err := tr.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, status, st)
	assert.Equal(t, int64(3), st.InFlight("127.0.0.1:32768"))
}

// R21b: a rejected apply is an error on the engine side, with its class.
func TestR21b_TrafficRejectionKeepsItsClass(t *testing.T) {
	tr := sdktest.ServeTraffic(t, &recTraffic{err: fmt.Errorf("edge rejected generation 7: %w", core.ErrUnavailable)})
	_, err := tr.Apply(context.Background(), routetable.Graph{})
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "edge rejected generation 7")
}
