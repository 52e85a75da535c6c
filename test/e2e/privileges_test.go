package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// TestPrivileges_ValidateAndDeployNeedOperatorApproval: a capability beyond
// Docker's defaults and a host device are refused by validate and by
// deploy (nothing created) until the operator approves them under
// [privileges.<app>] in the state directory's config.toml; the refusal
// names the line. Approved, the deploy runs with the capability.
func TestPrivileges_ValidateAndDeployNeedOperatorApproval(t *testing.T) {
	img := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2epriv")
	cfg := filepath.Join(a.State, "config.toml")
	refused := webManifest(a.Name, img, "priv.test", "cap_add = [\"SYS_PTRACE\"]\ndevices = [\"/dev/fuse\"]")
	want := fmt.Sprintf(`set cap_add = ["SYS_PTRACE"] and devices = ["/dev/fuse"] under [privileges.%s] in %s`, a.Name, cfg)

	a.Write(refused)
	r := a.Gordon("validate", "-f", a.File)
	require.Equal(t, 1, r.Code, r.String())
	assert.Contains(t, r.Stderr, "service web: capability SYS_PTRACE and device /dev/fuse need the operator's approval: "+want)

	_, r = a.Deploy(refused)
	require.NotEqual(t, 0, r.Code, r.String())
	assert.Contains(t, r.Stderr, want)
	assert.Empty(t, fixture.Managed(t, a.Name, "web"), "a refusal creates nothing")

	approved := webManifest(a.Name, img, "priv.test", "cap_add = [\"SYS_PTRACE\"]")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("[privileges.%s]\ncap_add = [\"SYS_PTRACE\"]\n", a.Name)), 0o600))
	a.Write(approved)
	r = a.Gordon("validate", "-f", a.File)
	require.Equal(t, 0, r.Code, r.String())
	op := a.MustDeploy(approved)
	require.Equal(t, "success", op.Outcome)
}

// TestReservedNames_ValidateAndDeployRefuse: an app named edge is refused
// by validate and by deploy, before anything is created.
func TestReservedNames_ValidateAndDeployRefuse(t *testing.T) {
	img := testimages.Require(t, "v1", "httpd")["httpd"]
	state := t.TempDir()
	file := filepath.Join(t.TempDir(), "app.toml")
	fixture.WriteFile(t, file, webManifest("edge", img, "edge.test", ""))
	for _, verb := range []string{"validate", "deploy"} {
		r := fixture.Gordon(t, state, verb, "-f", file)
		require.Equal(t, 1, r.Code, r.String())
		assert.Contains(t, r.Stdout+r.Stderr, `app name "edge" is reserved`, verb)
	}
	assert.Empty(t, fixture.Managed(t, "edge", "web"))
}
