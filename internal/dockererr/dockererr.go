// Package dockererr is the one classifier of Docker engine errors: it maps
// an error of the moby client (or of the context a call ran under) to
// exactly one core error class (core/errors.go). The runtime backend and
// the system containers (system/docker) both use it.
package dockererr

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Class returns the core class of err (nil for nil):
//
//   - context.Canceled, context.DeadlineExceeded → core.ErrUnavailable
//   - not found → core.ErrNotFound
//   - conflict, already exists, failed precondition (e.g. removing a
//     running container, a name in use) → core.ErrConflict
//   - invalid argument → core.ErrInvalid
//   - anything else (engine unreachable, server errors) → core.ErrUnavailable
func Class(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return core.ErrUnavailable
	case cerrdefs.IsNotFound(err):
		return core.ErrNotFound
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err), cerrdefs.IsFailedPrecondition(err):
		return core.ErrConflict
	case cerrdefs.IsInvalidArgument(err):
		return core.ErrInvalid
	default:
		return core.ErrUnavailable
	}
}

// Classify wraps err with its class: "<class>: <err>", where both the class
// and err stay in the chain (errors.Is holds for either). nil stays nil.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", Class(err), err)
}

// Unreachable reports whether err says the engine could not be reached at
// all (connection refused, no socket, permission denied on the socket); a
// cancelled or expired context is not.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if client.IsErrConnectionFailed(err) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "connect: no such file or directory") ||
		strings.Contains(s, "connect: connection refused") ||
		strings.Contains(s, "connect: permission denied")
}
