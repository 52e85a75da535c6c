package traffic

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

var _ core.TrafficRoutes = (*TrafficClient)(nil)

// Routes implements core.TrafficRoutes; a plugin without it answers
// UNIMPLEMENTED, reported as an error wrapping errors.ErrUnsupported.
func (c *TrafficClient) Routes(ctx context.Context) (routetable.Graph, error) {
	r, err := c.rpc.Routes(ctx, &pb.Empty{})
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			return routetable.Graph{}, fmt.Errorf("traffic plugin: routes: %w", errors.ErrUnsupported)
		}
		return routetable.Graph{}, wire.FromGRPC(ctx, c.origin, "routes", err)
	}
	return graphFromProto(r), nil
}

// Routes serves core.TrafficRoutes when impl has it.
func (s *TrafficGRPCServer) Routes(ctx context.Context, _ *pb.Empty) (*pb.Graph, error) {
	tr, ok := s.impl.(core.TrafficRoutes)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "traffic backend does not report its routes")
	}
	g, err := tr.Routes(ctx)
	if err != nil {
		return nil, wire.ToGRPC(err)
	}
	return graphToProto(g), nil
}
