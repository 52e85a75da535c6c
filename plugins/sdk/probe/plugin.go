// Package probe is the plugin SDK for readiness probes (core.Prober): the
// go-plugin glue (plugin.go), the gRPC server adapting any core.Prober
// (server.go), the client implementing core.Prober over gRPC (client.go)
// and the proto conversions (convert.go). A custom probe plugin is a page:
//
//	func main() { probe.Serve(myProbe{}) }
//
// built as an executable named gordon-probe-<name> on the plugin path and
// used by readiness type "plugin" with plugin = "<name>".
package probe

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// Plugin is the go-plugin glue of the probe kind. The serving side sets
// Impl (and optionally Info); the host side sets Origin.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl   core.Prober
	Info   wire.Info
	Origin wire.Origin
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the Probe service backed by Impl.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProbeServer(s, NewServer(p.Impl, p.Info))
	return nil
}

// GRPCClient returns a *ProbeClient (a core.Prober) over conn.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return NewClient(conn, p.Origin), nil
}

// Serve serves impl as a probe plugin until the host ends the process; the
// name comes from the executable (gordon-probe-<name>).
func Serve(impl core.Prober) { ServeInfo(impl, wire.Info{}) }

// ServeInfo is Serve with an explicit name and version in info.
func ServeInfo(impl core.Prober, info wire.Info) {
	info = wire.FillInfo(wire.KindProbe, info)
	wire.Serve(info, &Plugin{Impl: impl, Info: info})
}
