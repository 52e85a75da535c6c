// Package traffic is the plugin SDK for traffic backends (core.Traffic):
// go-plugin glue (plugin.go), the gRPC server adapting any core.Traffic
// (server.go), the client implementing core.Traffic over gRPC (client.go)
// and the proto conversions (convert.go). A custom traffic plugin is
//
//	func main() { traffic.Serve(myTraffic{}) }
//
// built as an executable named gordon-traffic-<name> on the plugin path.
package traffic

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// Plugin is the go-plugin glue of the traffic kind. The serving side sets
// Impl (and optionally Info); the host side sets Origin.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl   core.Traffic
	Info   wire.Info
	Origin wire.Origin
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the Traffic service backed by Impl.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterTrafficServer(s, NewServer(p.Impl, p.Info))
	return nil
}

// GRPCClient returns a *TrafficClient (a core.Traffic) over conn.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return NewClient(conn, p.Origin), nil
}

// Serve serves impl as a traffic plugin until the host ends the process;
// the name comes from the executable (gordon-traffic-<name>).
func Serve(impl core.Traffic) { ServeInfo(impl, wire.Info{}) }

// ServeInfo is Serve with an explicit name and version in info.
func ServeInfo(impl core.Traffic, info wire.Info) {
	info = wire.FillInfo(wire.KindTraffic, info)
	wire.Serve(info, &Plugin{Impl: impl, Info: info})
}
