package swarmlab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
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

// On a 3-node lab: a file secret (the engine's
// per-container copy, marked core.Mount.Secret) becomes the Docker secret
// gordon-<app>-<secret>-<12 hex of a keyed MAC>, which the task reads at
// /run/secrets/<name> on whatever node it runs; a second instance with
// the same content shares it, new content makes a new one; removing an
// instance removes its secrets only once no other service references
// them.
func TestSwarmSecrets_FileSecretsAreDockerSecretsRemovedWithTheirLastService(t *testing.T) {
	need(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := t.TempDir()
	require.NoError(t, testimages.Compile(ctx, bin, "sigd"))
	lab, err := Up(ctx, Options{Nodes: 3, Prefix: "gsr", Subnet: "10.76.0", Registry: true, Log: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { _ = lab.Down() })
	img, err := lab.PushImage(ctx, "sigd:sec", filepath.Join(bin, "sigd"))
	require.NoError(t, err)
	rt, err := swarmrt.New(lab.Nodes[0].Host, false)
	require.NoError(t, err)
	defer rt.Close()
	require.NoError(t, rt.PullImage(ctx, img))
	ref, err := rt.ResolveImage(ctx, img)
	require.NoError(t, err)
	_, err = rt.EnsureNetwork(ctx, core.NetworkSpec{Name: "gordon-sec"})
	require.NoError(t, err)

	copies := t.TempDir()
	mk := func(op, value string) string {
		src := filepath.Join(copies, op, "tls.key")
		require.NoError(t, os.MkdirAll(filepath.Dir(src), 0o700))
		require.NoError(t, os.WriteFile(src, []byte(value), 0o600))
		id, err := rt.CreateContainer(ctx, core.ContainerSpec{Name: "gordon-sec-web-" + op, Image: ref.Ref, Network: "gordon-sec",
			Labels: map[string]string{core.LabelManaged: "true", core.LabelApp: "sec", core.LabelService: "web", core.LabelOp: op},
			Env:    []string{"EXIT_ON=SIGTERM"}, StopGrace: 5 * time.Second,
			Mounts: []core.Mount{{Type: core.MountBind, Source: src, Target: "/run/secrets/tls.key", ReadOnly: true, Secret: "tls.key"}}})
		require.NoError(t, err)
		require.NoError(t, rt.StartContainer(ctx, id))
		return id
	}
	// plain is the name a bare content hash would give: what a keyed MAC
	// must never be, or a listed name would confirm a guessed value.
	plain := func(v string) string {
		sum := sha256.Sum256([]byte(v))
		return "gordon-sec-tls.key-" + hex.EncodeToString(sum[:])[:12]
	}
	secrets := func() []string {
		out, err := lab.Docker(ctx, 1, "secret", "ls", "--filter", "label=dev.gordon.app=sec", "--format", "{{.Name}}")
		require.NoError(t, err)
		return strings.Fields(out)
	}

	a := mk("op1", "KEY1")
	first := secrets()
	require.Len(t, first, 1)
	key1 := first[0]
	assert.True(t, strings.HasPrefix(key1, "gordon-sec-tls.key-"), key1)
	assert.NotEqual(t, plain("KEY1"), key1, "a keyed MAC, not a content hash")
	assert.Contains(t, readSecretOfTask(ctx, t, lab, a), "KEY1", "the task's node holds the secret for it")
	target, err := lab.Docker(ctx, 1, "service", "inspect", "-f", "{{range .Spec.TaskTemplate.ContainerSpec.Secrets}}{{.File.Name}} {{.File.Mode}}{{end}}", a)
	require.NoError(t, err)
	assert.Equal(t, "/run/secrets/tls.key -rw-------", target, "at the engine's target, with the copy's mode")
	b := mk("op2", "KEY1")
	assert.Equal(t, []string{key1}, secrets(), "same content: shared")
	c := mk("op3", "KEY2")
	both := secrets()
	require.Len(t, both, 2, "new content: a new secret")
	require.Contains(t, both, key1)
	key2 := both[0]
	if key2 == key1 {
		key2 = both[1]
	}
	assert.NotEqual(t, plain("KEY2"), key2)

	require.NoError(t, rt.RemoveContainer(ctx, a, true))
	assert.ElementsMatch(t, []string{key1, key2}, secrets(), "still referenced by the second instance")
	require.NoError(t, rt.RemoveContainer(ctx, b, true))
	assert.Equal(t, []string{key2}, secrets(), "removed with its last service")
	require.NoError(t, rt.RemoveContainer(ctx, c, true))
	assert.Empty(t, secrets())
	t.Logf("test took %v", time.Since(began).Round(time.Millisecond))
}

// readSecretOfTask reads the secret files of service id's running
// container on its node (the tmpfs Docker mounts at
// <data-root>/containers/<id>/mounts/secrets, bound at their targets: the
// image has no shell, and docker cp sees the rootfs placeholder).
func readSecretOfTask(ctx context.Context, t *testing.T, lab *Lab, id string) string {
	t.Helper()
	host := nodeOf(ctx, t, lab, id)
	for _, n := range lab.Nodes {
		if n.Name != host {
			continue
		}
		cid, err := lab.Docker(ctx, n.Index, "ps", "-q", "--no-trunc", "--filter", "label=com.docker.swarm.service.id="+id)
		require.NoError(t, err)
		require.NotEmpty(t, cid, "the task's container on %s", host)
		files, err := filepath.Glob(filepath.Join(n.dir, "root", "containers", strings.Fields(cid)[0], "mounts", "secrets", "*"))
		require.NoError(t, err)
		var out []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			out = append(out, string(b))
		}
		return strings.Join(out, "\n")
	}
	t.Fatalf("no node %q", host)
	return ""
}
