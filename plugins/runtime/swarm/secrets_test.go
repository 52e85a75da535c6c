package swarm

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Swarm's secret name rule and length.
var swarmSecretNameRE = regexp.MustCompile(`^[a-zA-Z0-9]+(?:[a-zA-Z0-9-_.]*[a-zA-Z0-9])?$`)

// On a swarm: a file secret becomes the Docker secret
// gordon-<app>-<secret>-<12 hex of sha256(content)>: a new one per
// content, within Swarm's name rules.
func TestSwarm_SecretNameIsPerAppSecretAndContent(t *testing.T) {
	assert.Equal(t, "gordon-shop-tls.key-"+sha12("KEY"), secretName("shop", "tls.key", []byte("KEY")))
	assert.NotEqual(t, secretName("shop", "tls.key", []byte("KEY")), secretName("shop", "tls.key", []byte("KEY2")), "new content, new secret")
	long := secretName(strings.Repeat("a", 63), "_"+strings.Repeat("b", 100), []byte("x"))
	assert.Len(t, long, 64)
	assert.True(t, strings.HasSuffix(long, "-"+sha12("x")))
	for _, n := range []string{long, secretName("shop", "-odd_name", nil)} {
		assert.Regexp(t, swarmSecretNameRE, n)
	}
}

func sha12(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:12]
}

// The service references each file secret at the engine's target with
// the per-container copy's owner and mode; the copy is not bind-mounted,
// and it neither pins the instance nor is refused as a bind mount.
func TestSwarm_FileSecretsMapOntoSecretReferences(t *testing.T) {
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(copyPath, []byte("KEY"), 0o600))
	c := baseSpec()
	c.Mounts = []core.Mount{{Type: core.MountBind, Source: copyPath, Target: "/run/secrets/tls.key", ReadOnly: true, Secret: "tls.key"}}
	assert.False(t, singleWriter(c), "a secret's copy is no host path")
	s, err := serviceSpec(c, "")
	require.NoError(t, err, "not refused as a bind mount")
	assert.Empty(t, s.TaskTemplate.ContainerSpec.Mounts, "not bind-mounted")

	files, err := secretFiles(c)
	require.NoError(t, err)
	require.Len(t, files, 1)
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	assert.Equal(t, secretFile{name: "gordon-shop-tls.key-" + sha12("KEY"), data: []byte("KEY"), target: "/run/secrets/tls.key",
		uid: uid, gid: gid, mode: 0o600}, files[0])
	assert.Equal(t, &swarm.SecretReference{SecretID: "sid", SecretName: files[0].name,
		File: &swarm.SecretReferenceFileTarget{Name: "/run/secrets/tls.key", UID: uid, GID: gid, Mode: 0o600}}, secretRef(files[0], "sid"))

	c.Mounts[0].Source = filepath.Join(dir, "gone")
	_, err = secretFiles(c)
	require.ErrorIs(t, err, core.ErrNotFound)
	require.NoError(t, os.WriteFile(copyPath, make([]byte, maxSecretSize+1), 0o600))
	c.Mounts[0].Source = copyPath
	_, err = secretFiles(c)
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "at most 500 KiB")
}

// A removed service's secrets go only when gordon manages them and no
// other service references them.
func TestSwarm_SecretsGoWhenNoServiceReferencesThem(t *testing.T) {
	refs := []*swarm.SecretReference{{SecretID: "a"}, {SecretID: "b"}, {SecretID: "c"}, {SecretID: "a"}, nil}
	managed := []swarm.Secret{{ID: "a"}, {ID: "b"}}
	other := swarm.Service{Spec: swarm.ServiceSpec{TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{
		Secrets: []*swarm.SecretReference{{SecretID: "b"}}}}}}
	assert.Equal(t, []string{"a"}, unreferenced(refs, managed, []swarm.Service{other, {}}),
		"b is still referenced, c is not gordon's, a once")
}
