package runtime

import (
	"context"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// RuntimeGRPCServer adapts any core.Runtime to the gRPC Runtime service.
// It holds no logic: it converts, calls impl, and maps errors to status
// codes with wire.ToGRPC (the class survives the wire).
type RuntimeGRPCServer struct {
	pb.UnimplementedRuntimeServer
	impl core.Runtime
	info wire.Info
}

var _ pb.RuntimeServer = (*RuntimeGRPCServer)(nil)

// NewServer returns the gRPC server of impl; info is what Describe reports
// (Kind and ProtocolVersion are forced, PID is this process).
func NewServer(impl core.Runtime, info wire.Info) *RuntimeGRPCServer {
	return &RuntimeGRPCServer{impl: impl, info: wire.FillInfo(wire.KindRuntime, info)}
}

func (s *RuntimeGRPCServer) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	return &pb.DescribeResponse{Info: wire.InfoToProto(wire.WithPID(s.info))}, nil
}

func (s *RuntimeGRPCServer) Info(ctx context.Context, _ *pb.Empty) (*pb.RuntimeInfo, error) {
	i, err := s.impl.Info(ctx)
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return infoToProto(i), nil
}

func (s *RuntimeGRPCServer) ResolveImage(ctx context.Context, r *pb.ResolveImageRequest) (*pb.ImageRef, error) {
	i, err := s.impl.ResolveImage(ctx, r.GetRef())
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return imageToProto(i), nil
}

func (s *RuntimeGRPCServer) PullImage(ctx context.Context, r *pb.PullImageRequest) (*pb.Empty, error) {
	return &pb.Empty{}, wire.ToGRPC(s.impl.PullImage(ctx, r.GetRef()))
}

func (s *RuntimeGRPCServer) EnsureNetwork(ctx context.Context, r *pb.NetworkSpec) (*pb.EnsureNetworkResponse, error) {
	id, err := s.impl.EnsureNetwork(ctx, networkFromProto(r))
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return &pb.EnsureNetworkResponse{Id: id}, nil
}

func (s *RuntimeGRPCServer) EnsureVolume(ctx context.Context, r *pb.VolumeSpec) (*pb.Empty, error) {
	return &pb.Empty{}, wire.ToGRPC(s.impl.EnsureVolume(ctx, volumeFromProto(r)))
}

func (s *RuntimeGRPCServer) CreateContainer(ctx context.Context, r *pb.ContainerSpec) (*pb.CreateContainerResponse, error) {
	id, err := s.impl.CreateContainer(ctx, containerSpecFromProto(r))
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return &pb.CreateContainerResponse{Id: id}, nil
}

func (s *RuntimeGRPCServer) StartContainer(ctx context.Context, r *pb.ContainerRequest) (*pb.Empty, error) {
	return &pb.Empty{}, wire.ToGRPC(s.impl.StartContainer(ctx, r.GetId()))
}

func (s *RuntimeGRPCServer) StopContainer(ctx context.Context, r *pb.StopContainerRequest) (*pb.Empty, error) {
	return &pb.Empty{}, wire.ToGRPC(s.impl.StopContainer(ctx, r.GetId(), wire.DurationFromProto(r.GetGrace())))
}

func (s *RuntimeGRPCServer) RemoveContainer(ctx context.Context, r *pb.RemoveContainerRequest) (*pb.Empty, error) {
	return &pb.Empty{}, wire.ToGRPC(s.impl.RemoveContainer(ctx, r.GetId(), r.GetForce()))
}

func (s *RuntimeGRPCServer) RestartContainer(ctx context.Context, r *pb.StopContainerRequest) (*pb.Empty, error) {
	return &pb.Empty{}, wire.ToGRPC(s.impl.RestartContainer(ctx, r.GetId(), wire.DurationFromProto(r.GetGrace())))
}

func (s *RuntimeGRPCServer) InspectContainer(ctx context.Context, r *pb.ContainerRequest) (*pb.ContainerState, error) {
	st, err := s.impl.InspectContainer(ctx, r.GetId())
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return stateToProto(st), nil
}

func (s *RuntimeGRPCServer) BackendBinds(ctx context.Context, r *pb.BackendBindsRequest) (*pb.BackendBindsResponse, error) {
	bs, err := s.impl.BackendBinds(ctx, r.GetId(), portsFromProto(r.GetPorts()))
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return &pb.BackendBindsResponse{Binds: bindsToProto(bs)}, nil
}

func (s *RuntimeGRPCServer) Logs(r *pb.LogsRequest, stream pb.Runtime_LogsServer) error {
	err := s.impl.Logs(stream.Context(), r.GetId(), logOptionsFromProto(r), func(l core.LogLine) error {
		return stream.Send(lineToProto(l))
	})
	return wire.ToGRPC(err)
}

func (s *RuntimeGRPCServer) ListManaged(ctx context.Context, r *pb.ListManagedRequest) (*pb.ListManagedResponse, error) {
	cs, err := s.impl.ListManaged(ctx, r.GetLabels())
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	out := &pb.ListManagedResponse{}
	for _, c := range cs {
		out.Containers = append(out.Containers, stateToProto(c))
	}
	return out, nil
}

// ProbeInternal serves core.InternalProber when the implementation has it.
func (s *RuntimeGRPCServer) ProbeInternal(ctx context.Context, r *pb.InternalProbeRequest) (*pb.InternalProbeResponse, error) {
	ip, ok := s.impl.(core.InternalProber)
	if !ok {
		return s.UnimplementedRuntimeServer.ProbeInternal(ctx, r)
	}
	res, err := ip.ProbeInternal(ctx, core.InternalProbe{
		Container: r.GetContainer(), Type: r.GetType(), Port: int(r.GetPort()), Path: r.GetPath(), Host: r.GetHost(),
		Timeout: wire.DurationFromProto(r.GetTimeout()),
	})
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return &pb.InternalProbeResponse{Ready: res.Ready, Attempts: int32(res.Attempts), Detail: res.Detail}, nil
}
