// Command testplugin is the subprocess plugin of plugins/sdk's tests. Its
// behaviour is chosen by the name it is run as (tests symlink it as
// gordon-<kind>-<mode>) or, as a built-in, by GORDON_PLUGIN:
//
//	gordon-runtime-fake, gordon-probe-fake, gordon-traffic-fake: serve a fake
//	gordon-*-sleepy:  sleep 1 h before the handshake
//	gordon-*-garbage: print a line of garbage on stdout, then sleep
//	gordon-*-crash:   write to stderr and exit 3 before the handshake
//	gordon-*-v2:      serve the right kind at protocol version 2
//	GORDON_PLUGIN=runtime/builtin: serve the fake runtime as a built-in
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/runtime"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/traffic"
)

func main() {
	kind, mode := "runtime", "fake"
	if id := os.Getenv("GORDON_PLUGIN"); id != "" {
		k, n, _ := strings.Cut(id, "/")
		kind, mode = k, "fake"
		if n != "builtin" {
			mode = n
		}
	} else {
		base := strings.TrimPrefix(filepath.Base(os.Args[0]), "gordon-")
		kind, mode, _ = strings.Cut(base, "-")
	}
	switch mode {
	case "sleepy":
		time.Sleep(time.Hour)
	case "garbage":
		fmt.Println("hello from a plugin that does not know the protocol")
		time.Sleep(time.Hour)
	case "crash":
		fmt.Fprintln(os.Stderr, "testplugin: crashing on purpose")
		os.Exit(3)
	case "v2":
		serveV2(kind)
	default:
		serve(kind)
	}
}

func serve(kind string) {
	info := wire.Info{Name: "fake", Version: "test"}
	switch kind {
	case wire.KindRuntime:
		runtime.ServeInfo(fakeRuntime{}, info)
	case wire.KindProbe:
		probe.ServeInfo(fakeProbe{}, info)
	case wire.KindTraffic:
		traffic.ServeInfo(fakeTraffic{}, info)
	default:
		fmt.Fprintln(os.Stderr, "testplugin: unknown kind", kind)
		os.Exit(2)
	}
}

// serveV2 serves only protocol version 2, as a newer plugin would.
func serveV2(kind string) {
	info := wire.FillInfo(kind, wire.Info{Name: "v2"})
	var p plugin.Plugin
	switch kind {
	case wire.KindProbe:
		p = &probe.Plugin{Impl: fakeProbe{}, Info: info}
	case wire.KindTraffic:
		p = &traffic.Plugin{Impl: fakeTraffic{}, Info: info}
	default:
		p = &runtime.Plugin{Impl: fakeRuntime{}, Info: info}
	}
	hs := wire.Handshake
	hs.ProtocolVersion = 2
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  hs,
		VersionedPlugins: map[int]plugin.PluginSet{2: {kind: p}},
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true}),
	})
}

// fakeRuntime reports its environment through Info so tests can check what
// the host passed: Name = $GORDON_TEST_ENV, OS = $TMPDIR, Arch = $GORDON_PLUGIN.
type fakeRuntime struct{}

func (fakeRuntime) Info(context.Context) (core.RuntimeInfo, error) {
	return core.RuntimeInfo{Name: os.Getenv("GORDON_TEST_ENV"), Version: "1", OS: os.Getenv("TMPDIR"), Arch: os.Getenv("GORDON_PLUGIN")}, nil
}
func (fakeRuntime) ResolveImage(_ context.Context, ref string) (core.ImageRef, error) {
	return core.ImageRef{}, fmt.Errorf("image %q: %w", ref, core.ErrNotFound)
}
func (fakeRuntime) PullImage(context.Context, string) error { return core.ErrUnavailable }
func (fakeRuntime) EnsureNetwork(context.Context, core.NetworkSpec) (string, error) {
	return "net", nil
}
func (fakeRuntime) EnsureVolume(context.Context, core.VolumeSpec) error { return nil }
func (fakeRuntime) CreateContainer(context.Context, core.ContainerSpec) (string, error) {
	return "c1", nil
}
func (fakeRuntime) StartContainer(context.Context, string) error { return nil }
func (fakeRuntime) StopContainer(context.Context, string, time.Duration) error {
	return nil
}
func (fakeRuntime) RemoveContainer(context.Context, string, bool) error { return nil }
func (fakeRuntime) RestartContainer(context.Context, string, time.Duration) error {
	return nil
}
func (fakeRuntime) InspectContainer(_ context.Context, id string) (core.ContainerState, error) {
	if id == "exit" { // lets a test make the plugin die mid-call
		os.Exit(0)
	}
	return core.ContainerState{ID: id, Status: core.StatusRunning}, nil
}
func (fakeRuntime) BackendBinds(context.Context, string, []core.PortSpec) ([]core.BackendBind, error) {
	return nil, nil
}
func (fakeRuntime) Logs(context.Context, string, core.LogOptions, func(core.LogLine) error) error {
	return nil
}
func (fakeRuntime) ListManaged(context.Context, map[string]string) ([]core.ContainerState, error) {
	return nil, nil
}

type fakeProbe struct{}

func (fakeProbe) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "fake", Protocol: wire.ProtocolVersion}, nil
}
func (fakeProbe) ValidateConfig(context.Context, json.RawMessage) ([]string, error) {
	return nil, nil
}
func (fakeProbe) Check(context.Context, core.ProbeRequest) (core.ProbeResult, error) {
	fmt.Println("stray stdout from Check")
	fmt.Fprintln(os.Stderr, "stray stderr from Check")
	return core.ProbeResult{Ready: true, Detail: "fake"}, nil
}

type fakeTraffic struct{}

func (fakeTraffic) Apply(context.Context, routetable.Graph) (uint64, error) { return 1, nil }
func (fakeTraffic) Status(context.Context) (core.TrafficStatus, error) {
	return core.TrafficStatus{AppliedGeneration: 1}, nil
}
