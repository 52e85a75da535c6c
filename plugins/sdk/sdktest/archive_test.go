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

	"github.com/gordon-deploy/docker-gordon/core/snapshot"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

// offNetRuntime is recRuntime with a volume archive that cannot run from
// where it is (the swarm runtime outside the runner).
type offNetRuntime struct{ *recRuntime }

func (offNetRuntime) ExportVolume(context.Context, string, string, io.Writer) error {
	return fmt.Errorf("export: %w: this process is not on the control network", errors.ErrUnsupported)
}

func (offNetRuntime) RestoreVolume(context.Context, string, io.Reader) error {
	return fmt.Errorf("restore: %w: this process is not on the control network", errors.ErrUnsupported)
}

// A runtime's errors.ErrUnsupported from the volume archive crosses the
// plugin protocol as one (an auto snapshot is then skipped with a
// warning), with the runtime's reason and without the class's text twice.
func TestVolumeArchive_UnsupportedCrossesTheWireWithItsReason(t *testing.T) {
	rt := sdktest.ServeRuntime(t, offNetRuntime{&recRuntime{}})
	va, ok := rt.(snapshot.Archiver)
	require.True(t, ok)
	err := va.ExportVolume(context.Background(), "c1", "/data", &bytes.Buffer{})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Contains(t, err.Error(), "this process is not on the control network")
	assert.Equal(t, 1, bytes.Count([]byte(err.Error()), []byte("unsupported operation")), err.Error())
	err = va.RestoreVolume(context.Background(), "v", bytes.NewReader([]byte("tar")))
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Contains(t, err.Error(), "this process is not on the control network")
}
