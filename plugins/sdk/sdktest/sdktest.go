// Package sdktest holds test helpers for plugins and their hosts (STYLE
// "What we take" 8, 9): Serve* put an implementation behind go-plugin's
// in-process gRPC test connection and return the client-side interface, so
// a test crosses the real wire (proto conversion, error mapping) without a
// subprocess; ProbeSuite checks the core.Prober contract.
package sdktest

import (
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/runtime"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/traffic"
)

// TestName is the plugin name the Serve helpers report in Describe.
const TestName = "sdktest"

func dispense(t testing.TB, kind string, p plugin.Plugin) any {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{kind: p})
	_ = server // Close asks the server to stop (go-plugin's controller)
	t.Cleanup(func() { _ = client.Close() })
	v, err := client.Dispense(kind)
	if err != nil {
		t.Fatalf("sdktest: dispense %s: %v", kind, err)
	}
	return v
}

// ServeRuntime serves impl over an in-process gRPC connection and returns
// the core.Runtime client; both ends stop at the end of the test.
func ServeRuntime(t testing.TB, impl core.Runtime) core.Runtime {
	t.Helper()
	return dispense(t, wire.KindRuntime, &runtime.Plugin{Impl: impl, Info: wire.Info{Name: TestName}}).(core.Runtime)
}

// ServeProbe serves impl over an in-process gRPC connection and returns the
// core.Prober client.
func ServeProbe(t testing.TB, impl core.Prober) core.Prober {
	t.Helper()
	return dispense(t, wire.KindProbe, &probe.Plugin{Impl: impl, Info: wire.Info{Name: TestName}}).(core.Prober)
}

// ServeTraffic serves impl over an in-process gRPC connection and returns
// the core.Traffic client.
func ServeTraffic(t testing.TB, impl core.Traffic) core.Traffic {
	t.Helper()
	return dispense(t, wire.KindTraffic, &traffic.Plugin{Impl: impl, Info: wire.Info{Name: TestName}}).(core.Traffic)
}
