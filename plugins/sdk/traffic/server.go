package traffic

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// TrafficGRPCServer adapts any core.Traffic to the gRPC Traffic service;
// errors are mapped to status codes with their class (wire.ToGRPC).
type TrafficGRPCServer struct {
	pb.UnimplementedTrafficServer
	impl core.Traffic
	info wire.Info
}

var _ pb.TrafficServer = (*TrafficGRPCServer)(nil)

// NewServer returns the gRPC server of impl; info is what Describe reports.
func NewServer(impl core.Traffic, info wire.Info) *TrafficGRPCServer {
	return &TrafficGRPCServer{impl: impl, info: wire.FillInfo(wire.KindTraffic, info)}
}

func (s *TrafficGRPCServer) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	return &pb.DescribeResponse{Info: wire.InfoToProto(wire.WithPID(s.info))}, nil
}

func (s *TrafficGRPCServer) Apply(ctx context.Context, r *pb.ApplyRequest) (*pb.ApplyResponse, error) {
	gen, err := s.impl.Apply(ctx, graphFromProto(r.GetGraph()))
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return &pb.ApplyResponse{Generation: gen}, nil
}

func (s *TrafficGRPCServer) Status(ctx context.Context, _ *pb.Empty) (*pb.TrafficStatus, error) {
	st, err := s.impl.Status(ctx)
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return statusToProto(st), nil
}

// certStore returns impl as a core.CertStore, or an Unimplemented error.
func (s *TrafficGRPCServer) certStore() (core.CertStore, error) {
	cs, ok := s.impl.(core.CertStore)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this traffic backend does not hold HTTPS certificates")
	}
	return cs, nil
}

func (s *TrafficGRPCServer) AddCert(ctx context.Context, r *pb.AddCertRequest) (*pb.CertInfo, error) {
	cs, err := s.certStore()
	if err != nil {
		return nil, err
	}
	info, err := cs.AddCert(ctx, r.GetHost(), r.GetCertPem(), r.GetKeyPem())
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return certToProto(info), nil
}

func (s *TrafficGRPCServer) RemoveCert(ctx context.Context, r *pb.RemoveCertRequest) (*pb.Empty, error) {
	cs, err := s.certStore()
	if err != nil {
		return nil, err
	}
	if err := cs.RemoveCert(ctx, r.GetHost()); err != nil {
		return nil, wire.ToGRPC(err)
	}
	return &pb.Empty{}, nil
}

func (s *TrafficGRPCServer) ListCerts(ctx context.Context, _ *pb.Empty) (*pb.CertList, error) {
	cs, err := s.certStore()
	if err != nil {
		return nil, err
	}
	infos, err := cs.ListCerts(ctx)
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	out := &pb.CertList{}
	for _, in := range infos {
		out.Certs = append(out.Certs, certToProto(in))
	}
	return out, nil
}
