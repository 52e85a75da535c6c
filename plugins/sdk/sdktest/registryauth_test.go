package sdktest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

// authRuntime records the registry credentials each PullImage received.
type authRuntime struct {
	*recRuntime
	got []string
}

func (a *authRuntime) PullImage(ctx context.Context, ref string) error {
	a.got = append(a.got, ref+" "+core.RegistryAuthFrom(ctx))
	return nil
}

// SPEC S26: the credentials of a pull cross the plugin wire with the pull
// request, and only with it.
func TestS26_RegistryAuthCrossesTheWireWithThePull(t *testing.T) {
	fake := &authRuntime{recRuntime: &recRuntime{}}
	rt := sdktest.ServeRuntime(t, fake)
	ctx := context.Background()
	require.NoError(t, rt.PullImage(core.WithRegistryAuth(ctx, "eyJ1c2VybmFtZSI6ImEifQ"), "registry.example/blog:1.5"))
	require.NoError(t, rt.PullImage(ctx, "blog:1.6"))
	assert.Equal(t, []string{"registry.example/blog:1.5 eyJ1c2VybmFtZSI6ImEifQ", "blog:1.6 "}, fake.got)
}
