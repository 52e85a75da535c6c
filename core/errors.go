package core

import (
	"errors"
	"fmt"
)

// The closed set of error classes (STYLE "What we take" 4). Every error that
// crosses a package or process boundary wraps exactly one of these with %w,
// plus the app, service and container it concerns. plugins/sdk maps each class
// to a gRPC status code and back, so errors.Is holds on both sides of the wire.
// Exit status is decided only in cmd/docker-gordon.
var (
	// ErrNotFound: the object (container, image, app, revision, op, record)
	// does not exist. Runtime "not found" MUST wrap it (SPEC 1.3).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a state conflict (SPEC R6–R8, R14.4, R53): the request is
	// valid but the current state refuses it.
	ErrConflict = errors.New("state conflict")
	// ErrInvalid: bad input (manifest, flag, argument). Nothing was changed.
	ErrInvalid = errors.New("invalid argument")
	// ErrUnavailable: a backend or the engine could not be reached or timed
	// out; the call may succeed later.
	ErrUnavailable = errors.New("unavailable")
	// ErrNotReady: a candidate never became ready (readiness budget ran
	// out, or it exited while being probed). Core-side only.
	ErrNotReady = errors.New("not ready")
	// ErrInterrupted: the command was interrupted (Ctrl-C, SIGTERM) before
	// the operation finished; reconcile converges what it left.
	ErrInterrupted = errors.New("interrupted")
	// ErrPluginExited: a backend plugin process exited or broke its protocol.
	ErrPluginExited = errors.New("plugin exited")
)

// classes is the closed set above, in the order ClassOf asks.
var classes = []error{ErrNotFound, ErrConflict, ErrInvalid, ErrUnavailable, ErrPluginExited, ErrNotReady, ErrInterrupted}

// ClassOf returns the first error class err wraps (errors.Is), in the order
// ErrNotFound, ErrConflict, ErrInvalid, ErrUnavailable, ErrPluginExited,
// ErrNotReady, ErrInterrupted; nil when err carries none (or is nil).
func ClassOf(err error) error {
	for _, c := range classes {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}

// WithClass returns err unchanged when it already wraps an error class,
// else err wrapped with class, as "<class>: <err>" (both stay matchable
// with errors.Is). nil stays nil.
func WithClass(err, class error) error {
	if err == nil || ClassOf(err) != nil {
		return err
	}
	return fmt.Errorf("%w: %w", class, err)
}
