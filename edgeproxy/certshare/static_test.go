package certshare_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeStatic(t *testing.T, root, name, file, content string) {
	t.Helper()
	dir := filepath.Join(root, "static", name)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(content), 0o600))
}

func readStatic(t *testing.T, root, name, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "static", name, file))
	if os.IsNotExist(err) {
		return "<absent>"
	}
	require.NoError(t, err)
	return string(b)
}

// SyncStatic mirrors the server's static/ into the local certs root:
// adds, replaces, removes; a sync without a change reports none and
// touches nothing; the local acme/ is none of its business.
func TestSyncStatic_AddsReplacesRemoves(t *testing.T) {
	root, srv := serve(t, nil)
	c := client(t, srv, token)
	ctx := context.Background()
	local := t.TempDir()
	writeStatic(t, local, "stale.test", "cert.pem", "OLD-ONLY-LOCAL")
	require.NoError(t, os.MkdirAll(filepath.Join(local, "acme"), 0o700))

	writeStatic(t, root, "app.test", "cert.pem", "CERT1")
	writeStatic(t, root, "app.test", "key.pem", "KEY1")
	writeStatic(t, root, "wildcard_.example.com", "cert.pem", "WCERT")
	writeStatic(t, root, "wildcard_.example.com", "key.pem", "WKEY")

	changed, err := c.SyncStatic(ctx, local)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, "CERT1", readStatic(t, local, "app.test", "cert.pem"))
	assert.Equal(t, "KEY1", readStatic(t, local, "app.test", "key.pem"))
	assert.Equal(t, "WKEY", readStatic(t, local, "wildcard_.example.com", "key.pem"))
	assert.Equal(t, "<absent>", readStatic(t, local, "stale.test", "cert.pem"), "a host the server does not have is removed")
	fi, err := os.Stat(filepath.Join(local, "static", "app.test", "key.pem"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	_, err = os.Stat(filepath.Join(local, "acme"))
	assert.NoError(t, err, "acme/ untouched")

	before, err := os.Stat(filepath.Join(local, "static", "app.test", "cert.pem"))
	require.NoError(t, err)
	changed, err = c.SyncStatic(ctx, local)
	require.NoError(t, err)
	assert.False(t, changed, "nothing changed on the server")
	after, err := os.Stat(filepath.Join(local, "static", "app.test", "cert.pem"))
	require.NoError(t, err)
	assert.Equal(t, before.ModTime(), after.ModTime(), "an unchanged file is not rewritten")

	writeStatic(t, root, "app.test", "cert.pem", "CERT2")
	require.NoError(t, os.RemoveAll(filepath.Join(root, "static", "wildcard_.example.com")))
	changed, err = c.SyncStatic(ctx, local)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, "CERT2", readStatic(t, local, "app.test", "cert.pem"), "replaced")
	assert.Equal(t, "KEY1", readStatic(t, local, "app.test", "key.pem"))
	assert.Equal(t, "<absent>", readStatic(t, local, "wildcard_.example.com", "cert.pem"), "removed")

	require.NoError(t, os.Remove(filepath.Join(root, "static", "app.test", "key.pem")))
	changed, err = c.SyncStatic(ctx, local)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, "<absent>", readStatic(t, local, "app.test", "key.pem"), "a file the server dropped is dropped")
}
