// Command oldproto is a probe plugin that speaks plugin protocol version 99
// only (see package badprobes).
package main

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/go-plugin"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"
)

// Version is the protocol version this plugin claims.
const Version = 99

type ok struct{}

func (ok) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "oldproto", Protocol: Version}, nil
}

func (ok) ValidateConfig(context.Context, json.RawMessage) ([]string, error) { return nil, nil }

func (ok) Check(context.Context, core.ProbeRequest) (core.ProbeResult, error) {
	return core.ProbeResult{Ready: true}, nil
}

func main() {
	hs := sdk.Handshake
	hs.ProtocolVersion = Version
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  hs,
		VersionedPlugins: map[int]plugin.PluginSet{Version: {sdk.KindProbe: &probe.Plugin{Impl: ok{}}}},
		GRPCServer:       plugin.DefaultGRPCServer,
	})
}
