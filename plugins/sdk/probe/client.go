package probe

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// ProbeClient implements core.Prober over gRPC. Check returns ctx.Err()
// as is when the caller's context ends (SPEC R32.3); other errors keep
// their core class; a dead plugin process wraps core.ErrPluginExited.
type ProbeClient struct {
	rpc    pb.ProbeClient
	origin wire.Origin
}

var _ core.Prober = (*ProbeClient)(nil)

// NewClient returns the client over conn; origin names the plugin in errors.
func NewClient(conn grpc.ClientConnInterface, origin wire.Origin) *ProbeClient {
	return &ProbeClient{rpc: pb.NewProbeClient(conn), origin: origin}
}

// PluginInfo calls Describe and returns the plugin's identity.
func (c *ProbeClient) PluginInfo(ctx context.Context) (wire.Info, error) {
	r, err := c.rpc.Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		return wire.Info{}, wire.FromGRPC(ctx, c.origin, "describe", err)
	}
	return wire.InfoFromProto(r.GetInfo()), nil
}

// Describe implements core.Prober.
func (c *ProbeClient) Describe(ctx context.Context) (core.ProbeInfo, error) {
	r, err := c.rpc.Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		return core.ProbeInfo{}, wire.FromGRPC(ctx, c.origin, "describe", err)
	}
	return probeInfoFromProto(r.GetProbe()), nil
}

// ValidateConfig implements core.Prober.
func (c *ProbeClient) ValidateConfig(ctx context.Context, config json.RawMessage) ([]string, error) {
	r, err := c.rpc.ValidateConfig(ctx, &pb.ValidateConfigRequest{ConfigJson: config})
	if err != nil {
		return nil, wire.FromGRPC(ctx, c.origin, "validate config", err)
	}
	return r.GetProblems(), nil
}

// Check implements core.Prober: exactly one attempt.
func (c *ProbeClient) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	m, err := requestToProto(req)
	if err != nil {
		return core.ProbeResult{}, err
	}
	r, err := c.rpc.Check(ctx, m)
	if err != nil {
		return core.ProbeResult{}, wire.FromGRPC(ctx, c.origin, "check", err)
	}
	return core.ProbeResult{Ready: r.GetReady(), Detail: r.GetDetail()}, nil
}
