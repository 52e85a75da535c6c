package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/privilege"
)

// privilegedWeb is the web service asking for a capability beyond Docker's
// defaults and a host device.
func privilegedWeb() core.ServiceSpec {
	web := coretest.WebSpec(0)
	web.Container.CapAdd = []string{"SYS_ADMIN"}
	web.Devices = []string{"/dev/fuse"}
	return web
}

// TestPrivileges_DeployRefusedWithoutApproval: without the operator's
// approval a capability beyond Docker's defaults and a host device are
// refused by the deploy's checks and by the deploy itself, before any
// container is created, naming the line to set.
func TestPrivileges_DeployRefusedWithoutApproval(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Engine.PrivilegePolicy = nil // no operator approval at all
	spec := coretest.BlogApp(privilegedWeb())
	want := `capability SYS_ADMIN and device /dev/fuse need the operator's approval: set cap_add = ["SYS_ADMIN"] and devices = ["/dev/fuse"] under [privileges.blog]`

	err := h.Engine.CheckDeployable(h.Ctx(), spec, "")
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorContains(t, err, want)

	_, err = h.Engine.SubmitRevision(h.Ctx(), spec, "sha-priv")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorContains(t, err, want)
	assert.Empty(t, h.Runtime.Created(), "a refusal creates nothing")
}

// TestPrivileges_DeployRunsWhenApproved: the operator's policy is asked
// per app and service, and an approved service deploys with its options.
func TestPrivileges_DeployRunsWhenApproved(t *testing.T) {
	h := coretest.NewEngine(t)
	var asked []string
	h.Engine.PrivilegePolicy = func(app string, svc *core.ServiceSpec) error {
		asked = append(asked, app+"/"+svc.Name)
		return privilege.Refusal(app, "config.toml", privilege.Privileges{CapAdd: []string{"SYS_ADMIN"}, Devices: []string{"/dev/fuse"}}, svc)
	}
	_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(privilegedWeb()), "sha-priv")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
	require.NoError(t, err)
	assert.Contains(t, asked, "blog/web")
	created := h.Runtime.Created()
	require.NotEmpty(t, created)
	last := created[len(created)-1]
	assert.Equal(t, []string{"SYS_ADMIN"}, last.Options.CapAdd)
	assert.Equal(t, []string{"/dev/fuse"}, last.Devices)
}
