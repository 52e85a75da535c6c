package sdktest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

// execRuntime is recRuntime with core.ContainerExecer: it records the spec,
// writes two lines and exits 3.
type execRuntime struct {
	*recRuntime
	got core.ExecSpec
}

func (r *execRuntime) ExecContainer(_ context.Context, _ string, x core.ExecSpec, out func(string)) (int, error) {
	r.got = x
	out("line one")
	out("line two")
	return 3, nil
}

// TestR72_ExecCrossesThePluginWire: ExecContainer's spec, every output
// line in order and the exit code cross the plugin protocol; a runtime
// without it answers errors.ErrUnsupported.
func TestR72_ExecCrossesThePluginWire(t *testing.T) {
	fake := &execRuntime{recRuntime: &recRuntime{}}
	rt := sdktest.ServeRuntime(t, fake)
	ex, ok := rt.(core.ContainerExecer)
	require.True(t, ok)
	spec := core.ExecSpec{Cmd: []string{"bin/migrate", "up"}, Env: []string{"GORDON_APP=blog"}, User: "1000", WorkingDir: "/app"}
	var lines []string
	code, err := ex.ExecContainer(context.Background(), "c1", spec, func(l string) { lines = append(lines, l) })
	require.NoError(t, err)
	assert.Equal(t, 3, code)
	assert.Equal(t, []string{"line one", "line two"}, lines)
	assert.Equal(t, spec, fake.got)

	plain := sdktest.ServeRuntime(t, &recRuntime{})
	_, err = plain.(core.ContainerExecer).ExecContainer(context.Background(), "c1", spec, nil)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}
