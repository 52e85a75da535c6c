package docker

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func TestR18_LoopbackFallbackOnlyWhereTheHostCannotReachContainerIPs(t *testing.T) {
	for _, c := range []struct {
		name, host, goos, os, env string
		ips                       bool
	}{
		{"local linux engine", "unix:///var/run/docker.sock", "linux", "Debian GNU/Linux 12 (bookworm)", "", true},
		{"forced loopback", "unix:///var/run/docker.sock", "linux", "Ubuntu 24.04", "1", false},
		{"Docker Desktop", "unix:///var/run/docker.sock", "linux", "Docker Desktop", "", false},
		{"macOS host", "unix:///var/run/docker.sock", "darwin", "Docker Desktop", "", false},
		{"remote tcp engine", "tcp://10.0.0.5:2376", "linux", "Ubuntu 24.04", "", false},
		{"ssh engine", "ssh://deploy@host", "linux", "Ubuntu 24.04", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ips, why := reachesContainerIPs(c.host, c.goos, c.os, c.env)
			assert.Equal(t, c.ips, ips)
			if !ips {
				assert.NotEmpty(t, why, "the fallback says why")
			}
		})
	}
}

// R18: on an engine whose container IPs the host reaches, a container on
// its app network publishes nothing and is reached at its IP there.
func TestR18_ContainerOnItsNetworkIsReachedAtItsAddressNotAPublishedPort(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 60*time.Second)
	require.NoError(t, f.r.connect(ctx))
	if !f.r.usesContainerIPs() {
		t.Skipf("this engine falls back to loopback: %s", f.r.loopbackWhy)
	}
	netName := f.name("net")
	_, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: netName, Labels: f.labels()})
	require.NoError(t, err)
	spec := f.httpdSpec("addr", "VERSION=r18")
	spec.Network = netName
	id := f.createStart(spec)

	raw, err := f.r.Client().ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	assert.Empty(t, raw.Container.HostConfig.PortBindings, "no loopback port is published")

	binds, err := f.r.BackendBinds(ctx, id, spec.Ports)
	require.NoError(t, err)
	require.Len(t, binds, 1)
	b := binds[0]
	assert.Equal(t, netName, b.Network)
	assert.Equal(t, 8080, b.HostPort, "dialled at the container port")
	assert.Equal(t, raw.Container.NetworkSettings.Networks[netName].IPAddress.String(), b.IP)
	code, body := get(t, "http://"+bindAddr(b)+"/")
	_, err = f.r.BackendBinds(ctx, id, []core.PortSpec{{Port: 1234, Protocol: "tcp"}})
	assert.ErrorIs(t, err, core.ErrConflict, "a port the container does not expose has no endpoint")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "version=r18")

	// A stopped container has no address: never a stale one.
	require.NoError(t, f.r.StopContainer(ctx, id, time.Second))
	_, err = f.r.BackendBinds(ctx, id, spec.Ports)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, fmt.Sprint(err), "no address on network "+netName)
}

// R18 fallback: with container IPs unreachable, ports are published on
// 127.0.0.1 and BackendBinds reports those host ports (no IP).
func TestR18_LoopbackFallbackPublishesAndReportsHostPorts(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 60*time.Second)
	require.NoError(t, f.r.connect(ctx))
	f.r.mu.Lock()
	f.r.containerIPs = false
	f.r.mu.Unlock()
	netName := f.name("net")
	_, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: netName, Labels: f.labels()})
	require.NoError(t, err)
	spec := f.httpdSpec("loop")
	spec.Network = netName
	id := f.createStart(spec)
	binds, err := f.r.BackendBinds(ctx, id, spec.Ports)
	require.NoError(t, err)
	require.Len(t, binds, 1)
	assert.Empty(t, binds[0].IP)
	assert.NotEqual(t, 8080, binds[0].HostPort)
	code, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/", binds[0].HostPort))
	assert.Equal(t, http.StatusOK, code)
}

// bindAddr is where a bind is dialled: IP:HostPort, or 127.0.0.1:HostPort.
func bindAddr(b core.BackendBind) string {
	ip := b.IP
	if ip == "" {
		ip = "127.0.0.1"
	}
	return net.JoinHostPort(ip, strconv.Itoa(b.HostPort))
}
