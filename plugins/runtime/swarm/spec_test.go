package swarm

import (
	"os"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func baseSpec() core.ContainerSpec {
	return core.ContainerSpec{
		Name: "gordon-shop-web-1a2b3c4d", Image: "reg:5000/web@sha256:abc",
		Labels:  map[string]string{core.LabelManaged: "true", core.LabelApp: "shop", core.LabelService: "web"},
		Env:     []string{"A=1"},
		Network: "gordon-shop", Aliases: []string{"web"}, ExtraNetworks: []string{"shared", "gordon-shop"},
		Ports: []core.PortSpec{{Port: 8080, Protocol: "tcp"}},
	}
}

// On a swarm: an instance is a one-task service, created with 0 replicas,
// dnsrr, no published port, no update or rollback config; labels on the
// service and its container; the app network first with its aliases.
func TestSwarm_InstanceIsAServiceCreatedAtZeroReplicasWithoutVIPOrIngress(t *testing.T) {
	c := baseSpec()
	s, err := serviceSpec(c)
	require.NoError(t, err)
	assert.Equal(t, c.Name, s.Name)
	assert.Equal(t, c.Labels, s.Labels)
	assert.Equal(t, c.Labels, s.TaskTemplate.ContainerSpec.Labels)
	require.NotNil(t, s.Mode.Replicated)
	assert.Equal(t, uint64(0), *s.Mode.Replicated.Replicas)
	require.NotNil(t, s.EndpointSpec)
	assert.Equal(t, swarm.ResolutionModeDNSRR, s.EndpointSpec.Mode)
	assert.Empty(t, s.EndpointSpec.Ports, "nothing published: no ingress")
	assert.Nil(t, s.UpdateConfig)
	assert.Nil(t, s.RollbackConfig)
	assert.Equal(t, []swarm.NetworkAttachmentConfig{
		{Target: "gordon-shop", Aliases: []string{"web"}}, {Target: "shared"},
	}, s.TaskTemplate.Networks)
	assert.Equal(t, []string{"A=1"}, s.TaskTemplate.ContainerSpec.Env)
	assert.Equal(t, c.Image, s.TaskTemplate.ContainerSpec.Image)
	assert.Equal(t, DefaultGrace, *s.TaskTemplate.ContainerSpec.StopGracePeriod, "zero grace is 30 s (R25)")
	assert.Equal(t, swarm.RestartPolicyConditionNone, s.TaskTemplate.RestartPolicy.Condition)
	c.Labels[core.LabelOp] = "changed"
	assert.NotContains(t, s.Labels, core.LabelOp, "labels are copied")
}

// R25, S26: the stop signal and grace, healthcheck, entrypoint/command and
// options map onto the container spec.
func TestSwarm_ContainerKeysMapOntoTheTaskContainer(t *testing.T) {
	c := baseSpec()
	c.StopSignal, c.StopGrace, c.Hostname = "SIGQUIT", 12*time.Second, "web-host"
	c.Healthcheck = &core.Healthcheck{Test: []string{"CMD", "/app", "health"}, Interval: core.Duration(time.Second), Retries: 2}
	c.Entrypoint, c.Cmd = []string{"/bin/app"}, []string{"serve"}
	c.Options = core.ContainerOptions{
		User: "1000", WorkingDir: "/srv", Init: true, ReadOnly: true, ShmSize: 1 << 20,
		Tmpfs:      []core.TmpfsMount{{Path: "/tmp", Options: "size=64m,mode=1777"}},
		Ulimits:    []core.Ulimit{{Name: "nofile", Soft: 1024, Hard: 2048}},
		CapAdd:     []string{"NET_ADMIN"},
		ExtraHosts: []string{"db:10.0.0.5"},
		Resources:  core.Resources{Memory: 64 << 20, CPUs: 1.5, Pids: 100},
		Logging:    &core.Logging{Driver: "local"},
	}
	c.Mounts = []core.Mount{{Type: core.MountVolume, Source: "shop-data", Target: "/data"}}
	c.RestartPolicy = "unless-stopped"
	s, err := serviceSpec(c)
	require.NoError(t, err)
	cs := s.TaskTemplate.ContainerSpec
	assert.Equal(t, "SIGQUIT", cs.StopSignal)
	assert.Equal(t, 12*time.Second, *cs.StopGracePeriod)
	assert.Equal(t, "web-host", cs.Hostname)
	assert.Equal(t, &container.HealthConfig{Test: []string{"CMD", "/app", "health"}, Interval: time.Second, Retries: 2}, cs.Healthcheck)
	assert.Equal(t, []string{"/bin/app"}, cs.Command)
	assert.Equal(t, []string{"serve"}, cs.Args)
	assert.Equal(t, "1000", cs.User)
	assert.Equal(t, "/srv", cs.Dir)
	assert.True(t, *cs.Init)
	assert.True(t, cs.ReadOnly)
	assert.Equal(t, []string{"10.0.0.5 db"}, cs.Hosts)
	assert.Equal(t, []string{"NET_ADMIN"}, cs.CapabilityAdd)
	assert.Equal(t, "nofile", cs.Ulimits[0].Name)
	assert.Equal(t, []mount.Mount{
		{Type: mount.TypeVolume, Source: "shop-data", Target: "/data",
			VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{core.LabelManaged: "true", core.LabelApp: "shop"}}},
		{Type: mount.TypeTmpfs, Target: "/tmp", TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 64 << 20, Mode: os.FileMode(0o1777)}},
		{Type: mount.TypeTmpfs, Target: "/dev/shm", TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 1 << 20}},
	}, cs.Mounts)
	assert.Equal(t, &swarm.Limit{NanoCPUs: 1_500_000_000, MemoryBytes: 64 << 20, Pids: 100}, s.TaskTemplate.Resources.Limits)
	assert.Equal(t, "local", s.TaskTemplate.LogDriver.Name)
	assert.Equal(t, swarm.RestartPolicyConditionAny, s.TaskTemplate.RestartPolicy.Condition)
}

// S26: Command replaces the entrypoint and drops the image's arguments; an
// empty Entrypoint clears the image's; a disabled healthcheck is NONE.
func TestSwarm_CommandEntrypointAndDisabledHealthcheck(t *testing.T) {
	cmd, args := command(core.ContainerSpec{Command: []string{"/gordon-edge", "run"}})
	assert.Equal(t, []string{"/gordon-edge", "run"}, cmd)
	assert.Nil(t, args)
	cmd, args = command(core.ContainerSpec{Entrypoint: []string{}, Cmd: []string{"x"}})
	assert.Equal(t, []string{""}, cmd)
	assert.Equal(t, []string{"x"}, args)
	cmd, args = command(core.ContainerSpec{})
	assert.Nil(t, cmd)
	assert.Nil(t, args)
	assert.Equal(t, []string{"NONE"}, healthConfig(&core.Healthcheck{Disable: true}).Test)
	assert.Nil(t, healthConfig(nil))
}

// What a task on any node cannot honour is refused with core.ErrInvalid
// and the reason.
func TestSwarm_NodeBoundKeysAreRefusedWithTheReason(t *testing.T) {
	cases := map[string]struct {
		edit func(*core.ContainerSpec)
		want string
	}{
		"bind mount": {func(c *core.ContainerSpec) {
			c.Mounts = []core.Mount{{Type: core.MountBind, Source: "/srv", Target: "/srv"}}
		}, "names a path on one node, and an unpinned task may run on any node"},
		"device":         {func(c *core.ContainerSpec) { c.Devices = []string{"/dev/fuse"} }, "cannot map devices"},
		"host network":   {func(c *core.ContainerSpec) { c.HostNetwork = true }, "host network"},
		"no network":     {func(c *core.ContainerSpec) { c.Network = "" }, "attachable overlay"},
		"restart policy": {func(c *core.ContainerSpec) { c.RestartPolicy = "sometimes" }, "unknown restart policy"},
		"tmpfs option":   {func(c *core.ContainerSpec) { c.Options.Tmpfs = []core.TmpfsMount{{Path: "/t", Options: "noexec"}} }, "only size and mode"},
		"bad port":       {func(c *core.ContainerSpec) { c.Ports = []core.PortSpec{{Port: 70000}} }, "out of range"},
		"extra host":     {func(c *core.ContainerSpec) { c.Options.ExtraHosts = []string{"nocolon"} }, "name:ip"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := baseSpec()
			tc.edit(&c)
			_, err := serviceSpec(c)
			require.ErrorIs(t, err, core.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), c.Name)
		})
	}
}

func TestSwarm_RestartPolicyRoundTrip(t *testing.T) {
	for in, want := range map[string]string{"": "no", "unless-stopped": "always", "always": "always", "on-failure": "on-failure"} {
		p, err := restartPolicy(in)
		require.NoError(t, err)
		assert.Equal(t, want, restartPolicyName(p), in)
	}
	assert.Equal(t, "always", restartPolicyName(nil), "Swarm's default is any")
}

// An instance joins its app's overlay and the shared networks the
// manifest names, never the edge's control overlay: nothing a task spec
// says puts two apps, or an app and the control plane, on one network.
func TestSwarm_InstancesJoinOnlyTheirAppsNetworks(t *testing.T) {
	c := baseSpec()
	s, err := serviceSpec(c)
	require.NoError(t, err)
	assert.Equal(t, []swarm.NetworkAttachmentConfig{
		{Target: "gordon-shop", Aliases: []string{"web"}}, {Target: "shared"},
	}, s.TaskTemplate.Networks)
	c.ExtraNetworks = []string{"shared", "shared"}
	s, err = serviceSpec(c)
	require.NoError(t, err)
	assert.Len(t, s.TaskTemplate.Networks, 2, "joined once")
}

func TestSwarm_OptionsFromEnv(t *testing.T) {
	t.Setenv(EnvEdgeNetwork, " gordon-edge ")
	t.Setenv(EnvEdgeService, "gordon-edge")
	t.Setenv(EnvStateDir, "/var/lib/docker-gordon")
	assert.Equal(t, Options{EdgeNetwork: "gordon-edge", EdgeService: "gordon-edge", StateDir: "/var/lib/docker-gordon"}, OptionsFromEnv())
}
