package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// core.ContainerExecer (SPEC R72 hooks) over gRPC: the server streams one
// ExecEvent per output line, then one with exited set and the exit code.
// A plugin without it answers UNIMPLEMENTED, which the client reports as
// an error wrapping errors.ErrUnsupported.

var _ core.ContainerExecer = (*RuntimeClient)(nil)

// ExecContainer implements core.ContainerExecer.
func (c *RuntimeClient) ExecContainer(ctx context.Context, id string, x core.ExecSpec, output func(string)) (int, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.ExecContainer(sctx, execRequest(id, x))
	if err != nil {
		return -1, c.execErr(ctx, err)
	}
	return recvExit(ctx, c, id, stream.Recv, func(m *pb.ExecEvent) error {
		if output != nil {
			output(m.GetLine())
		}
		return nil
	})
}

// exitEvent is an exec stream's message: the last one has exited set.
type exitEvent interface {
	GetExited() bool
	GetExitCode() int32
}

// recvExit reads an exec stream until its exit message and returns the
// exit code; every message before it goes to handle, whose error ends the
// stream. A stream that ends without one is unavailable.
func recvExit[M exitEvent](ctx context.Context, c *RuntimeClient, id string, recv func() (M, error), handle func(M) error) (int, error) {
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return -1, fmt.Errorf("runtime plugin: exec in %s: the stream ended without an exit code: %w", id, core.ErrUnavailable)
		}
		if err != nil {
			return -1, c.execErr(ctx, err)
		}
		if m.GetExited() {
			return int(m.GetExitCode()), nil
		}
		if err := handle(m); err != nil {
			return -1, err
		}
	}
}

// execRequest is x in container id, on the wire; execSpec reads it back.
func execRequest(id string, x core.ExecSpec) *pb.ExecRequest {
	return &pb.ExecRequest{Id: id, Cmd: x.Cmd, Env: x.Env, User: x.User, WorkingDir: x.WorkingDir, Privileged: x.Privileged}
}

func execSpec(r *pb.ExecRequest) core.ExecSpec {
	return core.ExecSpec{Cmd: r.GetCmd(), Env: r.GetEnv(), User: r.GetUser(), WorkingDir: r.GetWorkingDir(), Privileged: r.GetPrivileged()}
}

func (c *RuntimeClient) execErr(ctx context.Context, err error) error {
	if u := unsupported(err, "exec"); u != nil {
		return u
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return c.err(ctx, "exec", err)
}

// ExecContainer serves core.ContainerExecer when impl has it.
func (s *RuntimeGRPCServer) ExecContainer(r *pb.ExecRequest, stream pb.Runtime_ExecContainerServer) error {
	ex, ok := s.impl.(core.ContainerExecer)
	if !ok {
		return status.Error(codes.Unimplemented, "runtime cannot exec in containers")
	}
	var sendErr error
	code, err := ex.ExecContainer(stream.Context(), r.GetId(), execSpec(r), func(line string) {
		if sendErr == nil {
			sendErr = stream.Send(&pb.ExecEvent{Line: strings.ToValidUTF8(line, "\uFFFD")})
		}
	})
	if err != nil {
		return wire.ToGRPC(err)
	}
	if sendErr != nil {
		return sendErr
	}
	return stream.Send(&pb.ExecEvent{Exited: true, ExitCode: int32(code)})
}

// streamExecer (the engine's snapshot.StreamExecer, which the plugin side
// does not import) over gRPC: the server streams the command's stdout as
// it is written (one ExecStreamEvent per write, each at most
// maxStreamChunk bytes) and each stderr line, then one with exited set.
type streamExecer interface {
	ExecStream(ctx context.Context, id string, x core.ExecSpec, stdout io.Writer, stderr func(string)) (int, error)
}

var _ streamExecer = (*RuntimeClient)(nil)

// maxStreamChunk bounds the stdout bytes of one ExecStreamEvent (well
// under gRPC's 4 MiB message limit).
const maxStreamChunk = 256 << 10

// ExecStream implements streamExecer.
func (c *RuntimeClient) ExecStream(ctx context.Context, id string, x core.ExecSpec, stdout io.Writer, stderr func(string)) (int, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.ExecStream(sctx, execRequest(id, x))
	if err != nil {
		return -1, c.execErr(ctx, err)
	}
	return recvExit(ctx, c, id, stream.Recv, func(m *pb.ExecStreamEvent) error {
		switch {
		case m.GetHasStderr():
			if stderr != nil {
				stderr(m.GetStderrLine())
			}
		case len(m.GetStdout()) > 0:
			_, err := stdout.Write(m.GetStdout())
			return err
		}
		return nil
	})
}

// ExecStream serves streamExecer when impl has it.
func (s *RuntimeGRPCServer) ExecStream(r *pb.ExecRequest, stream pb.Runtime_ExecStreamServer) error {
	ex, ok := s.impl.(streamExecer)
	if !ok {
		return status.Error(codes.Unimplemented, "runtime cannot stream a command's output")
	}
	var (
		mu      sync.Mutex // Send is not safe for concurrent use
		sendErr error
	)
	out := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		for n := 0; n < len(p); n += maxStreamChunk {
			chunk := p[n:min(len(p), n+maxStreamChunk)]
			if err := stream.Send(&pb.ExecStreamEvent{Stdout: chunk}); err != nil {
				return n, err
			}
		}
		return len(p), nil
	})
	code, err := ex.ExecStream(stream.Context(), r.GetId(), execSpec(r), out, func(line string) {
		mu.Lock()
		defer mu.Unlock()
		if sendErr == nil {
			sendErr = stream.Send(&pb.ExecStreamEvent{StderrLine: strings.ToValidUTF8(line, "\uFFFD"), HasStderr: true})
		}
	})
	if err != nil {
		return wire.ToGRPC(err)
	}
	if sendErr != nil {
		return sendErr
	}
	return stream.Send(&pb.ExecStreamEvent{Exited: true, ExitCode: int32(code)})
}

// writerFunc is an io.Writer from a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
