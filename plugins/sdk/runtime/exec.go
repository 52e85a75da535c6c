package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"

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
	stream, err := c.rpc.ExecContainer(sctx, &pb.ExecRequest{Id: id, Cmd: x.Cmd, Env: x.Env, User: x.User,
		WorkingDir: x.WorkingDir, Privileged: x.Privileged})
	if err != nil {
		return -1, c.execErr(ctx, err)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return -1, fmt.Errorf("runtime plugin: exec in %s: the stream ended without an exit code: %w", id, core.ErrUnavailable)
		}
		if err != nil {
			return -1, c.execErr(ctx, err)
		}
		if m.GetExited() {
			return int(m.GetExitCode()), nil
		}
		if output != nil {
			output(m.GetLine())
		}
	}
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
	code, err := ex.ExecContainer(stream.Context(), r.GetId(), core.ExecSpec{Cmd: r.GetCmd(), Env: r.GetEnv(), User: r.GetUser(),
		WorkingDir: r.GetWorkingDir(), Privileged: r.GetPrivileged()}, func(line string) {
		if sendErr == nil {
			sendErr = stream.Send(&pb.ExecEvent{Line: line})
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
