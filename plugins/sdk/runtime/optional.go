package runtime

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// The optional runtime extensions (core.VolumeInspector,
// core.NetworkRemover, core.RestartPolicySetter) over gRPC. A plugin that does not implement one
// answers UNIMPLEMENTED, which the client reports as an error wrapping
// errors.ErrUnsupported (the engine then skips the check or the reclaim).

var (
	_ core.VolumeInspector     = (*RuntimeClient)(nil)
	_ core.NetworkRemover      = (*RuntimeClient)(nil)
	_ core.RestartPolicySetter = (*RuntimeClient)(nil)
)

func unsupported(err error, op string) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("runtime plugin: %s: %w", op, errors.ErrUnsupported)
	}
	return nil
}

// InspectVolume implements core.VolumeInspector.
func (c *RuntimeClient) InspectVolume(ctx context.Context, name string) (core.VolumeState, error) {
	r, err := c.rpc.InspectVolume(ctx, &pb.VolumeRequest{Name: name})
	if err != nil {
		if u := unsupported(err, "inspect volume"); u != nil {
			return core.VolumeState{}, u
		}
		return core.VolumeState{}, c.err(ctx, "inspect volume", err)
	}
	return core.VolumeState{Name: r.GetName(), Labels: r.GetLabels()}, nil
}

// RemoveNetwork implements core.NetworkRemover.
func (c *RuntimeClient) RemoveNetwork(ctx context.Context, name string) error {
	_, err := c.rpc.RemoveNetwork(ctx, &pb.NetworkRequest{Name: name})
	if err != nil {
		if u := unsupported(err, "remove network"); u != nil {
			return u
		}
		return c.err(ctx, "remove network", err)
	}
	return nil
}

// InspectVolume serves core.VolumeInspector when impl has it.
func (s *RuntimeGRPCServer) InspectVolume(ctx context.Context, r *pb.VolumeRequest) (*pb.VolumeState, error) {
	vi, ok := s.impl.(core.VolumeInspector)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "runtime has no volume inspection")
	}
	v, err := vi.InspectVolume(ctx, r.GetName())
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return &pb.VolumeState{Name: v.Name, Labels: v.Labels}, nil
}

// RemoveNetwork serves core.NetworkRemover when impl has it.
func (s *RuntimeGRPCServer) RemoveNetwork(ctx context.Context, r *pb.NetworkRequest) (*pb.Empty, error) {
	nr, ok := s.impl.(core.NetworkRemover)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "runtime has no network removal")
	}
	return &pb.Empty{}, wire.ToGRPC(nr.RemoveNetwork(ctx, r.GetName()))
}

// SetRestartPolicy implements core.RestartPolicySetter.
func (c *RuntimeClient) SetRestartPolicy(ctx context.Context, id, policy string) error {
	_, err := c.rpc.SetRestartPolicy(ctx, &pb.RestartPolicyRequest{Id: id, Policy: policy})
	if err != nil {
		if u := unsupported(err, "set restart policy"); u != nil {
			return u
		}
		return c.err(ctx, "set restart policy", err)
	}
	return nil
}

// SetRestartPolicy serves core.RestartPolicySetter when impl has it.
func (s *RuntimeGRPCServer) SetRestartPolicy(ctx context.Context, r *pb.RestartPolicyRequest) (*pb.Empty, error) {
	rs, ok := s.impl.(core.RestartPolicySetter)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "runtime cannot set a restart policy")
	}
	return &pb.Empty{}, wire.ToGRPC(rs.SetRestartPolicy(ctx, r.GetId(), r.GetPolicy()))
}
