package sdktest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

// archiveRuntime is recRuntime with snapshot.Archiver's export: it writes
// payload in uneven pieces, or fails with err after the first piece.
type archiveRuntime struct {
	*recRuntime
	payload []byte
	err     error
}

func (r *archiveRuntime) ExportVolume(_ context.Context, id, path string, w io.Writer) error {
	for off, step := 0, 1; off < len(r.payload); off, step = off+step, step*3+1 {
		end := min(off+step, len(r.payload))
		if _, err := w.Write(r.payload[off:end]); err != nil {
			return fmt.Errorf("export volume at %s of %s: %w", path, id, err)
		}
		if r.err != nil {
			return r.err
		}
	}
	return nil
}

func (r *archiveRuntime) RestoreVolume(context.Context, string, io.Reader) error {
	return errors.ErrUnsupported
}

// failAfter takes n bytes, then fails every write with err.
type failAfter struct {
	n   int
	err error
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return f.n, f.err
	}
	f.n -= len(p)
	return len(p), nil
}

// A volume's tar crosses the plugin protocol byte for byte (docs/data.md:
// a snapshot is exactly the tar the runtime wrote), several MiB in uneven
// writes; the caller's own write error (the auto snapshot's size bound)
// comes back as itself, not as a cancelled call; a runtime's refusal keeps
// its kind.
func TestSnapshot_AVolumeTarCrossesThePluginWireByteForByte(t *testing.T) {
	payload := make([]byte, 5<<20+13)
	for i := range payload {
		payload[i] = byte(i*31 + i>>11)
	}
	rt := sdktest.ServeRuntime(t, &archiveRuntime{recRuntime: &recRuntime{}, payload: payload})
	va, ok := rt.(snapshot.Archiver)
	require.True(t, ok)
	var out bytes.Buffer
	require.NoError(t, va.ExportVolume(context.Background(), "c1", "/data", &out))
	assert.True(t, bytes.Equal(payload, out.Bytes()), "the tar differs: %d bytes in, %d out", len(payload), out.Len())

	bound := errors.New("above the bound")
	err := va.ExportVolume(context.Background(), "c1", "/data", &failAfter{n: 2 << 20, err: bound})
	assert.ErrorIs(t, err, bound)

	refusing := sdktest.ServeRuntime(t, &archiveRuntime{recRuntime: &recRuntime{}, payload: payload, err: fmt.Errorf("container is running: %w", core.ErrConflict)})
	err = refusing.(snapshot.Archiver).ExportVolume(context.Background(), "c1", "/data", io.Discard)
	assert.ErrorIs(t, err, core.ErrConflict)
}

// A tar small enough to sit whole in the socket's buffer, written and
// closed before the caller took the connection, still arrives whole: the
// call's end says the tar went through the socket, and the caller waits
// for it (a breaker saw 50 of 2000 such exports come back empty, as
// successes).
func TestSnapshot_ASmallTarIsNeverLostToTheCallsEnd(t *testing.T) {
	payload := make([]byte, 10<<10)
	for i := range payload {
		payload[i] = byte(i)
	}
	va := sdktest.ServeRuntime(t, &archiveRuntime{recRuntime: &recRuntime{}, payload: payload}).(snapshot.Archiver)
	for i := range 500 {
		var out bytes.Buffer
		require.NoError(t, va.ExportVolume(context.Background(), "c1", "/data", &out), "export %d", i)
		require.True(t, bytes.Equal(payload, out.Bytes()), "export %d: %d of %d bytes", i, out.Len(), len(payload))
	}
}
