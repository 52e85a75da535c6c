package compose

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestR72_ComposeLifecycleHooks: post_start and pre_stop map to the
// manifest's [[hooks.post_start]] / [[hooks.pre_stop]] with command, user,
// working_dir and environment; a privileged hook is refused.
func TestR72_ComposeLifecycleHooks(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": webHead + `    post_start:
      - command: ["/app", "warm"]
        user: "1000"
        working_dir: /srv
        environment: { MODE: warm }
    pre_stop:
      - command: /app flush
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	h := svcOf(t, res.Spec, "web").Hooks
	require.NotNil(t, h)
	assert.Equal(t, []core.HookCommand{{Command: []string{"/app", "warm"}, User: "1000", WorkingDir: "/srv", Env: map[string]string{"MODE": "warm"}}}, h.PostStart)
	assert.Equal(t, []core.HookCommand{{Command: []string{"/app", "flush"}}}, h.PreStop)
	assert.Nil(t, h.BeforeSwitch)

	p := refusal(t, webHead+"    post_start:\n      - command: [\"/app\"]\n        privileged: true\n", "services.web.post_start[0].privileged")
	assert.Contains(t, p.Message, "runs nothing privileged")
}
