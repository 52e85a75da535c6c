// Package runtime is the plugin SDK for runtime backends (core.Runtime):
// the go-plugin glue (plugin.go), the gRPC server adapting any core.Runtime
// (server.go), the client implementing core.Runtime over gRPC (client.go)
// and the proto conversions (convert.go). A custom runtime plugin is
//
//	func main() { runtime.Serve(myRuntime{}) }
//
// built as an executable named gordon-runtime-<name> on the plugin path.
package runtime

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// Plugin is the go-plugin glue of the runtime kind. The serving side sets
// Impl (and optionally Info); the host side sets Origin.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the served runtime (plugin side only).
	Impl core.Runtime
	// Info is what Describe reports (plugin side; Name defaults to the
	// executable's gordon-runtime-<name>).
	Info wire.Info
	// Origin names the plugin in client errors (host side).
	Origin wire.Origin
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the Runtime service backed by Impl.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterRuntimeServer(s, NewServer(p.Impl, p.Info))
	return nil
}

// GRPCClient returns a *RuntimeClient (a core.Runtime) over conn.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return NewClient(conn, p.Origin), nil
}

// Serve serves impl as a runtime plugin until the host ends the process;
// the name comes from the executable (gordon-runtime-<name>).
func Serve(impl core.Runtime) { ServeInfo(impl, wire.Info{}) }

// ServeInfo is Serve with an explicit name and version in info.
func ServeInfo(impl core.Runtime, info wire.Info) {
	info = wire.FillInfo(wire.KindRuntime, info)
	wire.Serve(info, &Plugin{Impl: impl, Info: info})
}
