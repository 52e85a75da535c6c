package swarmlab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// need skips (or, under CI, fails) when the lab cannot run here.
func need(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, b := range []string{"ip", "nsenter", "unshare", "dockerd", "docker", "docker-registry", "bash", "curl"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("the swarm lab needs %s (CI installs them)", strings.Join(missing, ", "))
	}
	t.Skipf("the swarm lab needs %s", strings.Join(missing, ", "))
}

// The harness brings up a 3-node swarm (one manager, two workers) in its
// own namespaces, with a registry every node pulls from; a 3-replica
// service of a test image spreads over the nodes and each node answers on
// its host-mode port from the lab network; Down leaves no namespace,
// process or directory behind.
func TestLab_ThreeNodesServeOneImageFromTheLabRegistryAndDownLeavesNothing(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := t.TempDir()
	require.NoError(t, testimages.Compile(ctx, bin, "httpd"))

	lab, err := Up(ctx, Options{Nodes: 3, Prefix: "gsltest", Subnet: "10.79.0", Registry: true, Log: t.Logf})
	require.NoError(t, err)
	downed := false
	t.Cleanup(func() {
		if !downed {
			_ = lab.Down()
		}
	})

	out, err := lab.Docker(ctx, 1, "node", "ls", "--format", "{{.Hostname}} {{.Status}} {{.ManagerStatus}}")
	require.NoError(t, err)
	for _, n := range lab.Nodes {
		assert.Contains(t, out, n.Name+" Ready", "node list:\n%s", out)
	}

	ref, err := lab.PushImage(ctx, "httpd:lab", filepath.Join(bin, "httpd"))
	require.NoError(t, err)
	_, err = lab.Docker(ctx, 1, "service", "create", "--detach", "--name", "web", "--replicas", "3",
		"--replicas-max-per-node", "1", "--endpoint-mode", "dnsrr",
		"--publish", "mode=host,target=8080,published=18080", ref)
	require.NoError(t, err)
	var nodes string
	require.NoError(t, poll(ctx, 90*time.Second, func() bool {
		nodes, _ = lab.Docker(ctx, 1, "service", "ps", "web", "--filter", "desired-state=running", "--format", "{{.Node}} {{.CurrentState}}")
		return strings.Count(nodes, "Running") == 3
	}), "3 running tasks; last:\n%s", nodes)
	for _, n := range lab.Nodes {
		assert.Contains(t, nodes, n.Name, "one task per node")
		var body string
		require.NoError(t, poll(ctx, 30*time.Second, func() bool {
			body, err = lab.InLab(ctx, "curl", "-sf", "--max-time", "2", fmt.Sprintf("http://%s:18080/", n.IP))
			return err == nil
		}), "%s answers on its host-mode port: %v %s", n.Name, err, body)
	}

	require.NoError(t, lab.Down())
	downed = true
	_, err = os.Stat(lab.Root)
	assert.True(t, os.IsNotExist(err), "the lab root is removed")
	for _, ns := range append([]string{lab.LabNS}, nodeNetNS(lab)...) {
		_, err := os.Stat("/var/run/netns/" + ns)
		assert.True(t, os.IsNotExist(err), "namespace %s is deleted", ns)
	}
	assert.Empty(t, processesNaming(lab.Root+"/"), "no process of the lab is left")
}
