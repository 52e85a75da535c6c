package swarmlab

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	swarmrt "github.com/gordon-deploy/docker-gordon/plugins/runtime/swarm"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// The Swarm runtime on a 3-node lab: three instances (one service each)
// on an attachable overlay start, spread over at least two nodes, and each
// answers HTTP at the distinct overlay IP BackendBinds gives (dialled
// from a container on the overlay); ListManaged finds them by label;
// RestartContainer runs a new task in place;
// StopContainer stops one with its own stop signal (SIGQUIT, which the
// workload alone exits on) well before its grace; RemoveContainer removes
// them all; an image with no registry digest is refused, and so is a
// worker as the runtime's engine.
func TestSwarmRuntime_InstancesAreServicesReachedAtTaskIPsOnTheOverlay(t *testing.T) {
	need(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := t.TempDir()
	require.NoError(t, testimages.Compile(ctx, bin, "sigd", "httpd"))

	upAt := time.Now()
	lab, err := Up(ctx, Options{Nodes: 3, Prefix: "gslrt", Subnet: "10.80.0", Registry: true, Log: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { _ = lab.Down() })
	t.Logf("lab up in %v", time.Since(upAt).Round(time.Millisecond))
	sigd, err := lab.PushImage(ctx, "sigd:rt", filepath.Join(bin, "sigd"))
	require.NoError(t, err)
	client, err := lab.PushImage(ctx, "httpd:rt", filepath.Join(bin, "httpd"))
	require.NoError(t, err)

	rt, err := swarmrt.New(lab.Nodes[0].Host, false)
	require.NoError(t, err)
	defer rt.Close()
	img := checkInfoAndImage(ctx, t, lab, rt, sigd)

	const net = "gordon-rt-app"
	labels := map[string]string{core.LabelManaged: "true", core.LabelApp: "rt"}
	_, err = rt.EnsureNetwork(ctx, core.NetworkSpec{Name: net, Labels: labels})
	require.NoError(t, err)
	ids := startInstances(ctx, t, rt, img.Ref, net, labels)

	subnet := overlaySubnet(ctx, t, lab, net)
	nodes, ips := map[string]bool{}, map[string]bool{}
	for i, id := range ids {
		node, err := lab.Docker(ctx, 1, "service", "ps", id, "--filter", "desired-state=running", "--format", "{{.Node}}")
		require.NoError(t, err)
		binds, err := rt.BackendBinds(ctx, id, []core.PortSpec{{Port: 8080, Protocol: "tcp"}})
		require.NoError(t, err)
		require.Len(t, binds, 1)
		ip := netip.MustParseAddr(binds[0].IP)
		assert.True(t, subnet.Contains(ip), "%s in the overlay's subnet %s", ip, subnet)
		assert.Equal(t, net, binds[0].Network)
		assert.Equal(t, 8080, binds[0].HostPort)
		nodes[node], ips[ip.String()] = true, true
		t.Logf("instance %d: service %s on %s at %s", i, id[:12], node, ip)
		out, err := lab.Docker(ctx, 1, "run", "--rm", "--network", net, client, "-get", fmt.Sprintf("http://%s:8080/", ip))
		require.NoError(t, err, "GET from a container on the overlay: %s", out)
	}
	assert.GreaterOrEqual(t, len(nodes), 2, "instances spread over nodes: %v", nodes)
	assert.Len(t, ips, 3, "each instance has its own IP")

	listed, err := rt.ListManaged(ctx, labels)
	require.NoError(t, err)
	require.Len(t, listed, 3)
	for _, st := range listed {
		assert.True(t, st.Running(), "%s running", st.Name)
		assert.Equal(t, "healthy", st.Health, "%s healthy", st.Name)
	}

	before, err := rt.InspectContainer(ctx, ids[1])
	require.NoError(t, err)
	restartAt := time.Now()
	require.NoError(t, rt.RestartContainer(ctx, ids[1], 20*time.Second))
	t.Logf("restart took %v", time.Since(restartAt).Round(time.Millisecond))
	after, err := rt.InspectContainer(ctx, ids[1])
	require.NoError(t, err)
	assert.True(t, after.Running() && after.StartedAt.After(before.StartedAt), "restart runs a new task: %+v", after)

	stopAt := time.Now()
	require.NoError(t, rt.StopContainer(ctx, ids[0], 20*time.Second))
	stopped := time.Since(stopAt)
	st, err := rt.InspectContainer(ctx, ids[0])
	require.NoError(t, err)
	assert.Equal(t, core.StatusExited, st.Status)
	assert.Equal(t, 0, st.ExitCode, "exited on its own stop signal, not killed")
	assert.Less(t, stopped, 10*time.Second, "stopped by SIGQUIT, not killed after the 20 s grace")
	t.Logf("stop took %v", stopped.Round(time.Millisecond))
	logCtx, logCancel := context.WithTimeout(ctx, 20*time.Second)
	var lines []string
	require.NoError(t, rt.Logs(logCtx, ids[0], core.LogOptions{}, func(l core.LogLine) error {
		lines = append(lines, l.Text)
		return nil
	}))
	logCancel()
	assert.Contains(t, strings.Join(lines, "\n"), "exiting on SIGQUIT")

	for _, id := range ids {
		require.NoError(t, rt.RemoveContainer(ctx, id, true))
		_, err := rt.InspectContainer(ctx, id)
		require.ErrorIs(t, err, core.ErrNotFound)
	}
	listed, err = rt.ListManaged(ctx, labels)
	require.NoError(t, err)
	assert.Empty(t, listed)
	t.Logf("test took %v", time.Since(began).Round(time.Millisecond))
}

// startInstances creates three instances of image (sigd exits only on
// SIGQUIT, its stop signal; healthcheck every second) and starts them.
func startInstances(ctx context.Context, t *testing.T, rt *swarmrt.Runtime, image, net string, labels map[string]string) []string {
	t.Helper()
	var ids []string
	for i := range 3 {
		l := map[string]string{core.LabelService: "web", core.LabelOp: fmt.Sprintf("op%d", i)}
		for k, v := range labels {
			l[k] = v
		}
		id, err := rt.CreateContainer(ctx, core.ContainerSpec{
			Name: fmt.Sprintf("gordon-rt-web-%d", i), Image: image, Labels: l,
			Env: []string{"EXIT_ON=SIGQUIT"}, StopSignal: "SIGQUIT", StopGrace: 20 * time.Second,
			Healthcheck: &core.Healthcheck{Test: []string{"CMD", "/app", "health"},
				Interval: core.Duration(time.Second), Timeout: core.Duration(2 * time.Second), Retries: 2},
			Network: net, Aliases: []string{"web"}, Ports: []core.PortSpec{{Port: 8080, Protocol: "tcp"}},
		})
		require.NoError(t, err)
		st, err := rt.InspectContainer(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, core.StatusCreated, st.Status, "created, not running")
		ids = append(ids, id)
	}
	for _, id := range ids {
		at := time.Now()
		require.NoError(t, rt.StartContainer(ctx, id))
		t.Logf("start of %s (to healthy) took %v", id[:12], time.Since(at).Round(time.Millisecond))
	}
	return ids
}

// overlaySubnet is the IPv4 subnet of the named swarm network.
func overlaySubnet(ctx context.Context, t *testing.T, lab *Lab, net string) netip.Prefix {
	t.Helper()
	out, err := lab.Docker(ctx, 1, "network", "inspect", "-f", "{{.Driver}} {{.Attachable}} {{range .IPAM.Config}}{{.Subnet}}{{end}}", net)
	require.NoError(t, err)
	f := strings.Fields(out)
	require.Len(t, f, 3, out)
	assert.Equal(t, []string{"overlay", "true"}, f[:2], "an attachable overlay")
	t.Logf("network %s: attachable overlay %s", net, f[2])
	return netip.MustParsePrefix(f[2])
}

// checkInfoAndImage checks Info and NodeCount on the manager, that a worker
// is refused, and pins image by its registry digest (an image only the
// manager has is refused).
func checkInfoAndImage(ctx context.Context, t *testing.T, lab *Lab, rt *swarmrt.Runtime, image string) core.ImageRef {
	t.Helper()
	info, err := rt.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, "swarm", info.Name)
	ready, total, err := rt.NodeCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 3}, []int{ready, total}, "ready and total nodes")
	worker, err := swarmrt.New(lab.Nodes[1].Host, false)
	require.NoError(t, err)
	_, err = worker.Info(ctx)
	require.ErrorIs(t, err, core.ErrUnavailable, "a worker is not a manager")
	assert.Contains(t, err.Error(), "not a swarm manager")
	worker.Close()

	require.NoError(t, rt.PullImage(ctx, image))
	img, err := rt.ResolveImage(ctx, image)
	require.NoError(t, err)
	assert.Equal(t, lab.Registry+"/sigd@"+img.Digest, img.Ref, "pinned by registry digest")
	_, err = lab.Docker(ctx, 1, "tag", image, "local/only:1")
	require.NoError(t, err)
	_, err = rt.ResolveImage(ctx, "local/only:1")
	require.ErrorIs(t, err, core.ErrInvalid, "an image only the manager has is refused")
	assert.Contains(t, err.Error(), "push it to a registry the nodes can reach")
	return img
}
