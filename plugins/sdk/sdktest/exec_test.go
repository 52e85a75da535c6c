package sdktest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
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

// streamRuntime is recRuntime with snapshot.StreamExecer: it writes
// payload to stdout in uneven pieces, one stderr line between them, and
// exits 0.
type streamRuntime struct {
	*recRuntime
	payload []byte
}

func (r *streamRuntime) ExecStream(_ context.Context, _ string, _ core.ExecSpec, stdout io.Writer, stderr func(string)) (int, error) {
	half := len(r.payload) / 3
	if _, err := stdout.Write(r.payload[:half]); err != nil {
		return -1, err
	}
	stderr("pg_dumpall: dumping")
	if _, err := stdout.Write(r.payload[half:]); err != nil {
		return -1, err
	}
	return 0, nil
}

// An online dump crosses the plugin protocol byte for byte, larger than
// one message (binary, with newlines and zero bytes), with its stderr
// apart; a runtime without it answers errors.ErrUnsupported.
func TestBackupDump_StdoutCrossesThePluginWireByteForByte(t *testing.T) {
	payload := make([]byte, 3<<20+17)
	for i := range payload {
		payload[i] = byte(i*7 + i>>9)
	}
	rt := sdktest.ServeRuntime(t, &streamRuntime{recRuntime: &recRuntime{}, payload: payload})
	ex, ok := rt.(snapshot.StreamExecer)
	require.True(t, ok)
	var out bytes.Buffer
	var errs []string
	code, err := ex.ExecStream(context.Background(), "c1", core.ExecSpec{Cmd: []string{"pg_dumpall"}}, &out, func(l string) { errs = append(errs, l) })
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.True(t, bytes.Equal(payload, out.Bytes()), "the dump differs: %d bytes in, %d out", len(payload), out.Len())
	assert.Equal(t, []string{"pg_dumpall: dumping"}, errs)

	plain := sdktest.ServeRuntime(t, &recRuntime{})
	_, err = plain.(snapshot.StreamExecer).ExecStream(context.Background(), "c1", core.ExecSpec{Cmd: []string{"x"}}, io.Discard, nil)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}
