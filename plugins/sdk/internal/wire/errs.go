package wire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gordon-deploy/docker-gordon/core"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// Error classes as carried in pb.ErrorDetail.Class.
const (
	classNotFound     = "not_found"
	classConflict     = "conflict"
	classInvalid      = "invalid"
	classUnavailable  = "unavailable"
	classPluginExited = "plugin_exited"
	classCanceled     = "canceled"
	classDeadline     = "deadline_exceeded"
)

// classify returns the gRPC code and class name of err (STYLE "What we
// take" 4): ErrNotFound→NotFound, ErrConflict→FailedPrecondition,
// ErrInvalid→InvalidArgument, ErrUnavailable→Unavailable,
// ErrPluginExited→Unavailable (class kept), context.Canceled→Canceled,
// context.DeadlineExceeded→DeadlineExceeded, anything else→Unknown.
func classify(err error) (codes.Code, string) {
	switch {
	case errors.Is(err, core.ErrNotFound):
		return codes.NotFound, classNotFound
	case errors.Is(err, core.ErrConflict):
		return codes.FailedPrecondition, classConflict
	case errors.Is(err, core.ErrInvalid):
		return codes.InvalidArgument, classInvalid
	case errors.Is(err, core.ErrPluginExited):
		return codes.Unavailable, classPluginExited
	case errors.Is(err, core.ErrUnavailable):
		return codes.Unavailable, classUnavailable
	case errors.Is(err, context.Canceled):
		return codes.Canceled, classCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, classDeadline
	}
	return codes.Unknown, ""
}

// ToGRPC turns an implementation error into a gRPC status error carrying
// its class (server side). nil stays nil. The message is err.Error().
func ToGRPC(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isCoreClassed(err) {
		// Already a status (e.g. from a nested gRPC call): pass it through.
		return err
	}
	code, class := classify(err)
	st := status.New(code, err.Error())
	if withDetail, derr := st.WithDetails(&pb.ErrorDetail{Class: class}); derr == nil {
		st = withDetail
	}
	return st.Err()
}

func isCoreClassed(err error) bool {
	_, class := classify(err)
	return class != ""
}

// RemoteError is an error returned by a plugin: Error() is the plugin's
// message unchanged, Unwrap() the core class (or context error) it carried,
// so errors.Is(err, core.ErrNotFound) holds across the wire.
type RemoteError struct {
	// Plugin is "<kind>/<name>" when known.
	Plugin string
	// Msg is the plugin's error text.
	Msg string
	// Class is the core error class, context.Canceled,
	// context.DeadlineExceeded, or nil (unclassified).
	Class error
}

func (e *RemoteError) Error() string { return e.Msg }

// Unwrap returns the class.
func (e *RemoteError) Unwrap() error { return e.Class }

// Origin tells the client side which plugin it talks to and whether the
// plugin process has exited; the zero value (in-process tests) knows neither.
type Origin struct {
	// Name is "<kind>/<name>" (may be empty).
	Name string
	// Exited reports whether the plugin process is gone (may be nil).
	Exited func() bool
}

func (o Origin) exited() bool {
	if o.Exited == nil {
		return false
	}
	// The process reaper may lag the broken connection by a moment.
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		if o.Exited() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (o Origin) label() string {
	if o.Name == "" {
		return "plugin"
	}
	return "plugin " + o.Name
}

// FromGRPC turns an error of a gRPC call back into a classed error (client
// side). When ctx has ended and the call was cancelled, ctx.Err() is
// returned as is (SPEC R32.3). A transport failure (Unavailable without a
// class) wraps core.ErrPluginExited naming the plugin when its process is
// gone, else core.ErrUnavailable. op names the method for the message.
func FromGRPC(ctx context.Context, o Origin, op string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %s: %w", o.label(), op, err)
	}
	if st.Code() == codes.Canceled || st.Code() == codes.DeadlineExceeded {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		// The plugin's side of the propagated deadline can end the call
		// (RST_STREAM CANCEL) a moment before the caller's own timer
		// marks ctx done: past its deadline, ctx has ended all the same.
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			return context.DeadlineExceeded
		}
	}
	class, hasClass := "", false
	for _, d := range st.Details() {
		if ed, ok := d.(*pb.ErrorDetail); ok {
			class, hasClass = ed.Class, true
		}
	}
	if hasClass {
		return &RemoteError{Plugin: o.Name, Msg: st.Message(), Class: classErr(class)}
	}
	// No detail: the status came from the transport, not from the plugin.
	switch st.Code() {
	case codes.Unavailable:
		if o.exited() {
			return fmt.Errorf("%s: %s: %w: %s", o.label(), op, core.ErrPluginExited, st.Message())
		}
		return fmt.Errorf("%s: %s: %w: %s", o.label(), op, core.ErrUnavailable, st.Message())
	case codes.Canceled:
		return &RemoteError{Plugin: o.Name, Msg: st.Message(), Class: context.Canceled}
	case codes.DeadlineExceeded:
		return &RemoteError{Plugin: o.Name, Msg: st.Message(), Class: context.DeadlineExceeded}
	case codes.NotFound:
		return &RemoteError{Plugin: o.Name, Msg: st.Message(), Class: core.ErrNotFound}
	case codes.FailedPrecondition:
		return &RemoteError{Plugin: o.Name, Msg: st.Message(), Class: core.ErrConflict}
	case codes.InvalidArgument:
		return &RemoteError{Plugin: o.Name, Msg: st.Message(), Class: core.ErrInvalid}
	case codes.Unimplemented:
		return fmt.Errorf("%s: %s: %w: not implemented by the plugin", o.label(), op, core.ErrInvalid)
	}
	return fmt.Errorf("%s: %s: %s", o.label(), op, st.Message())
}

func classErr(class string) error {
	switch class {
	case classNotFound:
		return core.ErrNotFound
	case classConflict:
		return core.ErrConflict
	case classInvalid:
		return core.ErrInvalid
	case classUnavailable:
		return core.ErrUnavailable
	case classPluginExited:
		return core.ErrPluginExited
	case classCanceled:
		return context.Canceled
	case classDeadline:
		return context.DeadlineExceeded
	}
	return nil
}
