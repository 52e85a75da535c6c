package wire

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gordon-deploy/docker-gordon/core"
)

// STYLE 4: the server maps each class to its gRPC code.
func TestStyle4_ToGRPCCodes(t *testing.T) {
	for class, code := range map[error]codes.Code{
		core.ErrNotFound:         codes.NotFound,
		core.ErrConflict:         codes.FailedPrecondition,
		core.ErrInvalid:          codes.InvalidArgument,
		core.ErrUnavailable:      codes.Unavailable,
		core.ErrPluginExited:     codes.Unavailable,
		context.Canceled:         codes.Canceled,
		context.DeadlineExceeded: codes.DeadlineExceeded,
		errors.New("other"):      codes.Unknown,
	} {
		err := ToGRPC(fmt.Errorf("container c1: %w", class))
		assert.Equal(t, code, status.Code(err), class.Error())
	}
	assert.NoError(t, ToGRPC(nil))
}

// A transport failure (no class detail) is ErrUnavailable while the plugin
// runs and ErrPluginExited, naming it, once its process is gone.
func TestArch1_TransportUnavailableBecomesPluginExitedWhenProcessGone(t *testing.T) {
	transport := status.Error(codes.Unavailable, "error reading from server: EOF")
	alive := Origin{Name: "runtime/docker", Exited: func() bool { return false }}
	err := FromGRPC(context.Background(), alive, "inspect container", transport)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.NotErrorIs(t, err, core.ErrPluginExited)

	dead := Origin{Name: "runtime/docker", Exited: func() bool { return true }}
	err = FromGRPC(context.Background(), dead, "inspect container", transport)
	assert.ErrorIs(t, err, core.ErrPluginExited)
	assert.Contains(t, err.Error(), "plugin runtime/docker")
	assert.Contains(t, err.Error(), "inspect container")

	// A plugin's own ErrUnavailable (with its class) is never taken for a
	// dead process.
	err = FromGRPC(context.Background(), dead, "pull image", ToGRPC(fmt.Errorf("registry down: %w", core.ErrUnavailable)))
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.NotErrorIs(t, err, core.ErrPluginExited)
}

func TestArch1_UnimplementedMethodIsInvalid(t *testing.T) {
	err := FromGRPC(context.Background(), Origin{Name: "probe/x"}, "check", status.Error(codes.Unimplemented, "method Check not implemented"))
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "probe/x")
}

// R32.3: when the caller's context ended, its error is returned as is.
func TestR32_3_EndedContextIsReturnedAsIs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := FromGRPC(ctx, Origin{}, "check", status.Error(codes.Canceled, "context canceled"))
	assert.Equal(t, context.Canceled, err)
}
