package dockererr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Every engine error gets exactly one core class, and the engine's own
// error stays in the chain.
func TestClassMapsEngineErrorsToOneCoreClass(t *testing.T) {
	classes := []error{core.ErrNotFound, core.ErrConflict, core.ErrInvalid, core.ErrUnavailable}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"not found", fmt.Errorf("no such container: %w", cerrdefs.ErrNotFound), core.ErrNotFound},
		{"conflict", fmt.Errorf("name in use: %w", cerrdefs.ErrConflict), core.ErrConflict},
		{"already exists", cerrdefs.ErrAlreadyExists, core.ErrConflict},
		// e.g. removing a running container: the runtime's rule, kept.
		{"failed precondition", cerrdefs.ErrFailedPrecondition, core.ErrConflict},
		{"invalid argument", cerrdefs.ErrInvalidArgument, core.ErrInvalid},
		{"cancelled", fmt.Errorf("request: %w", context.Canceled), core.ErrUnavailable},
		{"deadline", context.DeadlineExceeded, core.ErrUnavailable},
		{"server error", cerrdefs.ErrInternal, core.ErrUnavailable},
		{"plain", errors.New("boom"), core.ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Class(c.err))
			got := Classify(c.err)
			assert.ErrorIs(t, got, c.want)
			assert.ErrorIs(t, got, c.err, "the engine's error stays in the chain")
			for _, other := range classes {
				if other != c.want {
					assert.NotErrorIs(t, got, other, "exactly one class")
				}
			}
		})
	}
	assert.NoError(t, Class(nil))
	assert.NoError(t, Classify(nil))
}

// A cancelled call stays context.Canceled through the classifier (a
// "%w: %v" wrap used to cut the chain).
func TestClassifyKeepsContextCanceled(t *testing.T) {
	err := Classify(fmt.Errorf("container start: %w", context.Canceled))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, core.ErrUnavailable)
}

func TestUnreachableOnlyForConnectionFailures(t *testing.T) {
	assert.True(t, Unreachable(errors.New("dial unix /var/run/docker.sock: connect: no such file or directory")))
	assert.True(t, Unreachable(errors.New("dial tcp 127.0.0.1:2375: connect: connection refused")))
	assert.True(t, Unreachable(errors.New("dial unix /var/run/docker.sock: connect: permission denied")))
	assert.False(t, Unreachable(fmt.Errorf("dial: connect: connection refused: %w", context.Canceled)), "a cancelled call is not an unreachable engine")
	assert.False(t, Unreachable(cerrdefs.ErrNotFound))
	assert.False(t, Unreachable(nil))
}
