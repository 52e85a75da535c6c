package traffic

import (
	"context"

	"google.golang.org/grpc"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// TrafficClient implements core.Traffic over gRPC; errors keep their core
// class and a dead plugin process wraps core.ErrPluginExited.
type TrafficClient struct {
	rpc    pb.TrafficClient
	origin wire.Origin
}

var _ core.Traffic = (*TrafficClient)(nil)

// NewClient returns the client over conn; origin names the plugin in errors.
func NewClient(conn grpc.ClientConnInterface, origin wire.Origin) *TrafficClient {
	return &TrafficClient{rpc: pb.NewTrafficClient(conn), origin: origin}
}

// PluginInfo calls Describe and returns the plugin's identity.
func (c *TrafficClient) PluginInfo(ctx context.Context) (wire.Info, error) {
	r, err := c.rpc.Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		return wire.Info{}, wire.FromGRPC(ctx, c.origin, "describe", err)
	}
	return wire.InfoFromProto(r.GetInfo()), nil
}

// Apply implements core.Traffic.
func (c *TrafficClient) Apply(ctx context.Context, g routetable.Graph) (uint64, error) {
	r, err := c.rpc.Apply(ctx, &pb.ApplyRequest{Graph: graphToProto(g)})
	if err != nil {
		return 0, wire.FromGRPC(ctx, c.origin, "apply", err)
	}
	return r.GetGeneration(), nil
}

// Status implements core.Traffic.
func (c *TrafficClient) Status(ctx context.Context) (core.TrafficStatus, error) {
	r, err := c.rpc.Status(ctx, &pb.Empty{})
	if err != nil {
		return core.TrafficStatus{}, wire.FromGRPC(ctx, c.origin, "status", err)
	}
	return statusFromProto(r), nil
}

var _ core.CertStore = (*TrafficClient)(nil)

// AddCert implements core.CertStore over the AddCert RPC (a plugin that
// does not hold certificates answers Unimplemented).
func (c *TrafficClient) AddCert(ctx context.Context, host string, certPEM, keyPEM []byte) (core.CertInfo, error) {
	r, err := c.rpc.AddCert(ctx, &pb.AddCertRequest{Host: host, CertPem: certPEM, KeyPem: keyPEM})
	if err != nil {
		return core.CertInfo{}, wire.FromGRPC(ctx, c.origin, "add certificate", err)
	}
	return certFromProto(r), nil
}

// RemoveCert implements core.CertStore.
func (c *TrafficClient) RemoveCert(ctx context.Context, host string) error {
	if _, err := c.rpc.RemoveCert(ctx, &pb.RemoveCertRequest{Host: host}); err != nil {
		return wire.FromGRPC(ctx, c.origin, "remove certificate", err)
	}
	return nil
}

// ListCerts implements core.CertStore.
func (c *TrafficClient) ListCerts(ctx context.Context) ([]core.CertInfo, error) {
	r, err := c.rpc.ListCerts(ctx, &pb.Empty{})
	if err != nil {
		return nil, wire.FromGRPC(ctx, c.origin, "list certificates", err)
	}
	out := make([]core.CertInfo, 0, len(r.GetCerts()))
	for _, ci := range r.GetCerts() {
		out = append(out, certFromProto(ci))
	}
	return out, nil
}
