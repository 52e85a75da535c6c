package swarm

import (
	"net/netip"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

var t0 = time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)

func service(health bool) swarm.Service {
	cs := &swarm.ContainerSpec{Image: "reg/web@sha256:abc", Env: []string{"A=1"}}
	if health {
		cs.Healthcheck = &container.HealthConfig{Test: []string{"CMD", "/app", "health"}}
	}
	return swarm.Service{ID: "svc1", Spec: swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: "gordon-shop-web-1", Labels: map[string]string{core.LabelApp: "shop"}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: cs, RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone}},
	}}
}

func task(id string, desired, state swarm.TaskState, at time.Time, exit int) swarm.Task {
	t := swarm.Task{ID: id, ServiceID: "svc1", DesiredState: desired, Status: swarm.TaskStatus{State: state, Timestamp: at}}
	if exit >= 0 {
		t.Status.ContainerStatus = &swarm.ContainerStatus{ExitCode: exit}
	}
	return t
}

// R2: the instance's ID is the service's; a service without a task is
// created, never started.
func TestSwarm_StateOfAServiceWithoutTaskIsCreated(t *testing.T) {
	st := stateOf(service(false), nil)
	assert.Equal(t, core.ContainerState{
		ID: "svc1", Name: "gordon-shop-web-1", Image: "reg/web@sha256:abc", Status: core.StatusCreated,
		RestartPolicy: "no", Env: []string{"A=1"}, Labels: map[string]string{core.LabelApp: "shop"},
	}, st)
}

// The current task is the newest one Swarm wants running; a running task
// is a running instance, started at its last state change; with a
// healthcheck, Swarm's starting state is health starting and running is
// healthy.
func TestSwarm_StateFollowsTheCurrentTask(t *testing.T) {
	old := task("old", swarm.TaskStateShutdown, swarm.TaskStateShutdown, t0.Add(time.Minute), 0)
	cur := task("cur", swarm.TaskStateRunning, swarm.TaskStateRunning, t0, -1)
	st := stateOf(service(true), []swarm.Task{old, cur})
	assert.Equal(t, core.StatusRunning, st.Status)
	assert.Equal(t, t0, st.StartedAt)
	assert.True(t, st.HasHealthcheck)
	assert.Equal(t, "healthy", st.Health)

	cur.Status.State = swarm.TaskStateStarting
	st = stateOf(service(true), []swarm.Task{old, cur})
	assert.Equal(t, core.StatusRunning, st.Status)
	assert.Equal(t, "starting", st.Health)

	cur.Status.State = swarm.TaskStatePreparing
	assert.Equal(t, core.StatusCreated, stateOf(service(true), []swarm.Task{cur}).Status, "not started yet")

	st = stateOf(service(false), []swarm.Task{task("r", swarm.TaskStateRunning, swarm.TaskStateRunning, t0, -1)})
	assert.Empty(t, st.Health, "no healthcheck, no health")
}

// A stopped or failed instance is exited with its container's exit code;
// a rejected task (never ran) is dead; an unhealthy failure says so.
func TestSwarm_StateOfFinishedTasks(t *testing.T) {
	st := stateOf(service(false), []swarm.Task{task("a", swarm.TaskStateShutdown, swarm.TaskStateShutdown, t0, 0)})
	assert.Equal(t, core.StatusExited, st.Status)
	assert.Equal(t, 0, st.ExitCode)

	failed := task("b", swarm.TaskStateShutdown, swarm.TaskStateFailed, t0, 3)
	failed.Status.Err = "task: non-zero exit (3)"
	st = stateOf(service(false), []swarm.Task{failed})
	assert.Equal(t, core.StatusExited, st.Status)
	assert.Equal(t, 3, st.ExitCode)
	assert.Contains(t, taskError(failed), "non-zero exit (3)")
	assert.Contains(t, taskError(failed), "exit code 3")

	sick := task("c", swarm.TaskStateShutdown, swarm.TaskStateFailed, t0, 137)
	sick.Status.Err = "task: container is unhealthy"
	st = stateOf(service(true), []swarm.Task{sick})
	assert.Equal(t, "unhealthy", st.Health)

	rej := task("d", swarm.TaskStateShutdown, swarm.TaskStateRejected, t0, -1)
	rej.Status.Err = "No such image: reg/web@sha256:abc"
	assert.Equal(t, core.StatusDead, stateOf(service(false), []swarm.Task{rej}).Status)
	assert.Contains(t, taskError(rej), "No such image")
}

// R18 on Swarm: the edge dials the task's own IP on the app's overlay
// (prefix stripped), at the container port; never a VIP or a name.
func TestSwarm_BackendBindsAreTheTaskIPOnTheAppOverlay(t *testing.T) {
	tk := task("t", swarm.TaskStateRunning, swarm.TaskStateRunning, t0, -1)
	tk.NetworksAttachments = []swarm.NetworkAttachment{
		{Network: swarm.Network{ID: "ingressid", Spec: swarm.NetworkSpec{Annotations: swarm.Annotations{Name: "ingress"}}},
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.9/24")}},
		{Network: swarm.Network{ID: "appid", Spec: swarm.NetworkSpec{Annotations: swarm.Annotations{Name: "gordon-shop"}}},
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.101.1.6/24")}},
	}
	ports := []core.PortSpec{{Port: 8080, Protocol: "tcp"}, {Port: 53, Protocol: "UDP"}, {Port: 9000}}
	want := []core.BackendBind{
		{ContainerPort: 8080, HostPort: 8080, Protocol: "tcp", IP: "10.101.1.6", Network: "gordon-shop"},
		{ContainerPort: 53, HostPort: 53, Protocol: "udp", IP: "10.101.1.6", Network: "gordon-shop"},
		{ContainerPort: 9000, HostPort: 9000, Protocol: "tcp", IP: "10.101.1.6", Network: "gordon-shop"},
	}
	for _, target := range []string{"appid", "gordon-shop"} { // Swarm stores the ID
		got, err := bindsOf(tk, target, ports)
		require.NoError(t, err, target)
		assert.Equal(t, want, got, target)
	}
	_, err := bindsOf(tk, "other", ports)
	require.ErrorIs(t, err, core.ErrConflict)
	_, err = bindsOf(tk, "appid", []core.PortSpec{{Port: 0}})
	require.ErrorIs(t, err, core.ErrInvalid)
}

func TestSwarm_CurrentTaskPrefersDesiredRunningThenNewest(t *testing.T) {
	a := task("a", swarm.TaskStateShutdown, swarm.TaskStateShutdown, t0.Add(2*time.Minute), 0)
	b := task("b", swarm.TaskStateRunning, swarm.TaskStateRunning, t0, -1)
	c := task("c", swarm.TaskStateRunning, swarm.TaskStatePreparing, t0.Add(time.Minute), -1)
	got, ok := currentTask([]swarm.Task{a, b, c})
	require.True(t, ok)
	assert.Equal(t, "c", got.ID)
	_, ok = currentTask(nil)
	assert.False(t, ok)
}

// The backend bind is the task's IP on its app's overlay (which the edge
// and the probes join), never on another network it is on; a task not
// attached there has no bind.
func TestSwarm_BackendBindsAreOnTheAppsNetwork(t *testing.T) {
	nets := []swarm.NetworkAttachmentConfig{{Target: "appid"}, {Target: "sharedid"}}
	assert.Equal(t, "appid", bindNetwork(nets))
	assert.Empty(t, bindNetwork(nil))

	tk := task("t", swarm.TaskStateRunning, swarm.TaskStateRunning, t0, -1)
	tk.NetworksAttachments = []swarm.NetworkAttachment{
		{Network: swarm.Network{ID: "appid", Spec: swarm.NetworkSpec{Annotations: swarm.Annotations{Name: "gordon-shop"}}},
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.101.1.6/24")}},
		{Network: swarm.Network{ID: "sharedid", Spec: swarm.NetworkSpec{Annotations: swarm.Annotations{Name: "shared"}}},
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.101.9.4/24")}},
	}
	ports := []core.PortSpec{{Port: 8080}}
	got, err := bindsOf(tk, bindNetwork(nets), ports)
	require.NoError(t, err)
	assert.Equal(t, []core.BackendBind{{ContainerPort: 8080, HostPort: 8080, Protocol: "tcp", IP: "10.101.1.6", Network: "gordon-shop"}}, got)
	tk.NetworksAttachments = tk.NetworksAttachments[1:]
	_, err = bindsOf(tk, "appid", ports)
	require.ErrorIs(t, err, core.ErrConflict, "not on the app's network")
}

// R29 on a swarm: an instance whose image has a HEALTHCHECK and whose
// manifest declares none carries the image's check in its service, so
// its state reports one, and Swarm's task states are read as its health
// (starting, then healthy; an unhealthy task fails) as docker readiness
// needs; a manifest's own check, or none in the image, is left as is.
func TestSwarm_ImageHealthcheckIsTheInstancesHealth(t *testing.T) {
	img := &container.HealthConfig{Test: []string{"CMD", "/app", "health"}, Interval: time.Second}
	svc := service(false)
	withImageHealthcheck(svc.Spec.TaskTemplate.ContainerSpec, img)
	require.NotNil(t, svc.Spec.TaskTemplate.ContainerSpec.Healthcheck)
	assert.Equal(t, img.Test, svc.Spec.TaskTemplate.ContainerSpec.Healthcheck.Test)

	cur := task("cur", swarm.TaskStateRunning, swarm.TaskStateStarting, t0, -1)
	st := stateOf(svc, []swarm.Task{cur})
	assert.True(t, st.HasHealthcheck)
	assert.Equal(t, "starting", st.Health)
	cur.Status.State = swarm.TaskStateRunning
	assert.Equal(t, "healthy", stateOf(svc, []swarm.Task{cur}).Health)
	failed := task("f", swarm.TaskStateShutdown, swarm.TaskStateFailed, t0, 137)
	failed.Status.Err = "task: unhealthy container"
	assert.Equal(t, "unhealthy", stateOf(svc, []swarm.Task{failed}).Health)

	own := service(true)
	withImageHealthcheck(own.Spec.TaskTemplate.ContainerSpec, img)
	assert.Equal(t, []string{"CMD", "/app", "health"}, own.Spec.TaskTemplate.ContainerSpec.Healthcheck.Test)
	assert.Zero(t, own.Spec.TaskTemplate.ContainerSpec.Healthcheck.Interval, "the manifest's check is kept")

	none := service(false)
	withImageHealthcheck(none.Spec.TaskTemplate.ContainerSpec, nil)
	withImageHealthcheck(none.Spec.TaskTemplate.ContainerSpec, &container.HealthConfig{Test: []string{"NONE"}})
	assert.False(t, stateOf(none, []swarm.Task{cur}).HasHealthcheck)
}
