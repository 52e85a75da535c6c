package probe

import (
	"context"
	"encoding/json"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// ProbeGRPCServer adapts any core.Prober to the gRPC Probe service; errors
// are mapped to status codes with their class (wire.ToGRPC).
type ProbeGRPCServer struct {
	pb.UnimplementedProbeServer
	impl core.Prober
	info wire.Info
}

var _ pb.ProbeServer = (*ProbeGRPCServer)(nil)

// NewServer returns the gRPC server of impl; info is what Describe reports.
func NewServer(impl core.Prober, info wire.Info) *ProbeGRPCServer {
	return &ProbeGRPCServer{impl: impl, info: wire.FillInfo(wire.KindProbe, info)}
}

// Describe returns the plugin info and impl.Describe.
func (s *ProbeGRPCServer) Describe(ctx context.Context, _ *pb.DescribeRequest) (*pb.ProbeDescribeResponse, error) {
	pi, err := s.impl.Describe(ctx)
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return &pb.ProbeDescribeResponse{Info: wire.InfoToProto(wire.WithPID(s.info)), Probe: probeInfoToProto(pi)}, nil
}

func (s *ProbeGRPCServer) ValidateConfig(ctx context.Context, r *pb.ValidateConfigRequest) (*pb.ValidateConfigResponse, error) {
	var cfg json.RawMessage
	if len(r.GetConfigJson()) > 0 {
		cfg = r.GetConfigJson()
	}
	problems, err := s.impl.ValidateConfig(ctx, cfg)
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return &pb.ValidateConfigResponse{Problems: problems}, nil
}

func (s *ProbeGRPCServer) Check(ctx context.Context, r *pb.CheckRequest) (*pb.CheckResponse, error) {
	req, err := requestFromProto(r)
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	res, err := s.impl.Check(ctx, req)
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return &pb.CheckResponse{Ready: res.Ready, Detail: res.Detail}, nil
}
