package wire

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

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

// pastDeadline is a context whose deadline has passed while its own timer
// has not yet marked it done (Err is nil): the moment the plugin's side of
// a propagated deadline can end a call first.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// R32.3: a call the plugin's side ended (RST_STREAM CANCEL, or its own
// deadline) after the caller's deadline passed is the caller's
// context.DeadlineExceeded, even before the caller's timer fires; before
// the deadline it stays the plugin's error.
func TestR32_3_CallEndedAfterTheCallersDeadlineIsItsDeadline(t *testing.T) {
	for _, code := range []codes.Code{codes.Canceled, codes.DeadlineExceeded} {
		err := status.Error(code, "stream terminated by RST_STREAM with error code: CANCEL")
		got := FromGRPC(pastDeadline{context.Background()}, Origin{Name: "p"}, "check", err)
		assert.Equal(t, context.DeadlineExceeded, got, "%v", code)

		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		got = FromGRPC(ctx, Origin{Name: "p"}, "check", err)
		cancel()
		assert.NotEqual(t, context.DeadlineExceeded, got, "%v: before the deadline it is the plugin's", code)
		var re *RemoteError
		assert.True(t, errors.As(got, &re), "%v: %v", code, got)
	}
}
