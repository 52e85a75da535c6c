package system

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/retention"
)

// TestOperatorConfig_ApprovalsAndRetention: config.toml's [binds],
// [privileges.<app>] and [retention] as the engine asks them; absent keys
// give the defaults, 0 keeps everything.
func TestOperatorConfig_ApprovalsAndRetention(t *testing.T) {
	state := t.TempDir()
	ops, revs := Retention(state)
	assert.Equal(t, []int{retention.DefaultOps, retention.DefaultRevisions}, []int{ops, revs}, "no config.toml: the defaults")
	svc := &core.ServiceSpec{Name: "web", Devices: []string{"/dev/fuse"}, Container: core.ContainerOptions{CapAdd: []string{"NET_ADMIN"}}}
	err := CheckPrivileges(state, core.AppSpec{Name: "shop", Services: []core.ServiceSpec{*svc}})
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorContains(t, err, `service web: capability NET_ADMIN and device /dev/fuse need the operator's approval: set cap_add = ["NET_ADMIN"] and devices = ["/dev/fuse"] under [privileges.shop] in `+filepath.Join(state, "config.toml"))

	require.NoError(t, os.WriteFile(filepath.Join(state, "config.toml"), []byte(`[binds]
site = "/srv/site"
[privileges.shop]
cap_add = ["NET_ADMIN"]
devices = ["/dev/fuse"]
[retention]
ops = 0
`), 0o600))
	assert.NoError(t, PrivilegePolicy(state, "shop", svc))
	assert.Error(t, PrivilegePolicy(state, "blog", svc), "approved for shop only")
	p, err := BindPath(state, "site")
	require.NoError(t, err)
	assert.Equal(t, "/srv/site", p)
	ops, revs = Retention(state)
	assert.Equal(t, []int{0, retention.DefaultRevisions}, []int{ops, revs})
}
