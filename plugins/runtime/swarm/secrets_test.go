package swarm

import (
	"crypto/hmac"
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
// gordon-<app>-<secret>-<12 hex of a keyed MAC>: a new one per content,
// within Swarm's name rules, and the suffix is no plain hash of the value:
// without the state directory's key, a name confirms no guess of it.
func TestSwarm_SecretNameIsPerAppSecretAndContent(t *testing.T) {
	key := []byte("k")
	assert.Equal(t, "gordon-shop-tls.key-"+mac12(key, "shop", "tls.key", "KEY"), secretName(key, "shop", "tls.key", []byte("KEY")))
	assert.NotEqual(t, secretName(key, "shop", "tls.key", []byte("KEY")), secretName(key, "shop", "tls.key", []byte("KEY2")), "new content, new secret")
	long := secretName(key, strings.Repeat("a", 63), "_"+strings.Repeat("b", 100), []byte("x"))
	assert.Len(t, long, 64)
	for _, n := range []string{long, secretName(key, "shop", "-odd_name", nil)} {
		assert.Regexp(t, swarmSecretNameRE, n)
	}
}

// A secret's name carries no hash of its value: the review's offline
// guess (sha256 of a candidate PIN against the name's suffix) matches
// nothing, and another state directory's key gives another name.
func TestSwarm_SecretNameLeaksNoContentHash(t *testing.T) {
	r := &Runtime{opts: Options{StateDir: t.TempDir()}}
	key, err := r.secretNameKey()
	require.NoError(t, err)
	require.Len(t, key, 32)
	name := secretName(key, "shop", "pin", []byte("1234"))
	for _, guess := range []string{"1234", "shop\x00pin\x001234"} {
		sum := sha256.Sum256([]byte(guess))
		assert.NotContains(t, name, hex.EncodeToString(sum[:])[:12], "a plain content hash confirms the guess %q", guess)
	}
	st, err := os.Stat(filepath.Join(r.opts.StateDir, secretNameKeyFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the key is the state directory user's only")
	again, err := (&Runtime{opts: Options{StateDir: r.opts.StateDir}}).secretNameKey()
	require.NoError(t, err)
	assert.Equal(t, key, again, "the same state directory names the same content the same (one secret per content)")
	other, err := (&Runtime{opts: Options{StateDir: t.TempDir()}}).secretNameKey()
	require.NoError(t, err)
	assert.NotEqual(t, name, secretName(other, "shop", "pin", []byte("1234")))
}

func mac12(key []byte, app, secret, value string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(app + "\x00" + secret + "\x00" + value))
	return hex.EncodeToString(m.Sum(nil))[:12]
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
	s, err := serviceSpec(c)
	require.NoError(t, err, "not refused as a bind mount")
	assert.Empty(t, s.TaskTemplate.ContainerSpec.Mounts, "not bind-mounted")

	files, err := secretFiles([]byte("k"), c)
	require.NoError(t, err)
	require.Len(t, files, 1)
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	assert.Equal(t, secretFile{name: "gordon-shop-tls.key-" + mac12([]byte("k"), "shop", "tls.key", "KEY"), data: []byte("KEY"), target: "/run/secrets/tls.key",
		uid: uid, gid: gid, mode: 0o600}, files[0])
	assert.Equal(t, &swarm.SecretReference{SecretID: "sid", SecretName: files[0].name,
		File: &swarm.SecretReferenceFileTarget{Name: "/run/secrets/tls.key", UID: uid, GID: gid, Mode: 0o600}}, secretRef(files[0], "sid"))

	c.Mounts[0].Source = filepath.Join(dir, "gone")
	_, err = secretFiles([]byte("k"), c)
	require.ErrorIs(t, err, core.ErrNotFound)
	require.NoError(t, os.WriteFile(copyPath, make([]byte, maxSecretSize+1), 0o600))
	c.Mounts[0].Source = copyPath
	_, err = secretFiles([]byte("k"), c)
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
