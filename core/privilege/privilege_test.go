package privilege_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/privilege"
)

// TestPrivileges_BeyondDefaultsNeedApproval: capabilities outside Docker's
// default set ("ALL" too) and every host device are refused unless
// approved, and the refusal names the line to set, keeping what is
// already approved.
func TestPrivileges_BeyondDefaultsNeedApproval(t *testing.T) {
	svc := &core.ServiceSpec{Name: "web", Devices: []string{"/dev/sda"},
		Container: core.ContainerOptions{CapAdd: []string{"NET_BIND_SERVICE", "CHOWN", "SYS_ADMIN", "ALL"}}}
	err := privilege.Refusal("shop", "/state/config.toml", privilege.Privileges{CapAdd: []string{"NET_ADMIN"}}, svc)
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), `capabilities SYS_ADMIN, ALL and device /dev/sda need the operator's approval: `+
		`set cap_add = ["NET_ADMIN", "SYS_ADMIN", "ALL"] and devices = ["/dev/sda"] under [privileges.shop] in /state/config.toml`)

	one := &core.ServiceSpec{Name: "web", Container: core.ContainerOptions{CapAdd: []string{"cap_sys_ptrace"}}}
	assert.ErrorContains(t, privilege.Refusal("shop", "/c.toml", privilege.Privileges{}, one),
		`capability SYS_PTRACE needs the operator's approval: set cap_add = ["SYS_PTRACE"] under [privileges.shop] in /c.toml`)
}

// TestPrivileges_ApprovedOrDefaultPass: Docker's defaults need nothing;
// an approved capability (any spelling), "ALL" approved, and an approved
// device pass.
func TestPrivileges_ApprovedOrDefaultPass(t *testing.T) {
	svc := &core.ServiceSpec{Name: "web", Devices: []string{"/dev/fuse"},
		Container: core.ContainerOptions{CapAdd: []string{"SYS_ADMIN", "NET_RAW"}, CapDrop: []string{"ALL"}}}
	assert.NoError(t, privilege.Refusal("shop", "/c", privilege.Privileges{CapAdd: []string{"cap_sys_admin"}, Devices: []string{"/dev/fuse"}}, svc))
	assert.NoError(t, privilege.Refusal("shop", "/c", privilege.Privileges{CapAdd: []string{"ALL"}, Devices: []string{"/dev/fuse"}}, svc))
	plain := &core.ServiceSpec{Name: "web", Container: core.ContainerOptions{CapAdd: []string{"NET_BIND_SERVICE"}}}
	assert.NoError(t, privilege.Refusal("shop", "/c", privilege.Privileges{}, plain))
}
