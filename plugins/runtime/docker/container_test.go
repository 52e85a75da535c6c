package docker

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

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
