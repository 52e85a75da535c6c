package swarm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The state mirror carries no secret-like value in the clear: with the
// control record's mirror key, a state config's data (what `docker config
// inspect` returns to anyone with a manager's API) holds neither an env
// value, nor a webhook URL, nor a basic-auth hash; the state directory
// that holds the key (an adopting manager recovers it) opens it, one
// without the key cannot, and a config written unsealed (before the key)
// is written again sealed.
func TestR80_StateConfigsAreSealedWithTheMirrorKey(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	appState(t, src, "web", "r1")
	secretish := []string{"DB_PASSWORD=hunter2-s3cret", "https://hooks.example.com/T000/B000/XXXXsecret", "$2a$12$abcdefghijklmnopqrstuv"}
	writeRecord(t, src, "web", "revisions/r1.json", `{"id":"r1","env":"`+secretish[0]+`","notify":"`+secretish[1]+`","auth":"`+secretish[2]+`"}`)
	f := &fakeConfigs{configs: map[string]swarm.Config{}}
	ctx := context.Background()
	m := &Mirror{API: f, StateDir: src, Node: "n1", Owner: "o1"}
	require.NoError(t, m.Sync(ctx))
	plain := stateConfigsOf(f, "web")
	require.Len(t, plain, 1)
	assert.Empty(t, plain[0].Spec.Labels[LabelStateEnc], "no control record yet: unsealed, as before")

	ctl, err := EnsureControl(src)
	require.NoError(t, err)
	require.Len(t, ctl.Key(), 32)
	m = &Mirror{API: f, StateDir: src, Node: "n1", Owner: "o1"}
	require.NoError(t, m.Sync(ctx))
	sealed := stateConfigsOf(f, "web")
	require.Len(t, sealed, 1, "the unsealed config is replaced")
	assert.Equal(t, sealAESGCM, sealed[0].Spec.Labels[LabelStateEnc])
	for _, s := range secretish {
		assert.NotContains(t, string(sealed[0].Spec.Data), s)
	}
	assert.True(t, strings.HasPrefix(string(sealed[0].Spec.Data), sealedPrefix))

	list, err := ListAdoptable(ctx, f)
	require.NoError(t, err)
	require.Len(t, list, 1)
	_, err = Fetch(ctx, f, list[0], nil)
	assert.True(t, errors.Is(err, ErrSealed), "without the key a sealed config does not open: %v", err)
	b, err := Fetch(ctx, f, list[0], ctl.Key())
	require.NoError(t, err)
	assert.Contains(t, string(b.Files["revisions/r1.json"]), secretish[0], "the key opens it")
	other, err := NewControl()
	require.NoError(t, err)
	_, err = Fetch(ctx, f, list[0], other.Key())
	assert.Error(t, err, "another swarm's key does not open it")

	require.NoError(t, SaveControl(dst, ctl))
	require.NoError(t, Adopt(ctx, f, dst, list[0]))
	got, err := os.ReadFile(filepath.Join(dst, "apps", "web", "revisions", "r1.json"))
	require.NoError(t, err)
	assert.Contains(t, string(got), secretish[1])
}
