// Command garbage is a probe plugin that writes garbage to stdout before
// its handshake line (see package badprobes).
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"
)

type ok struct{}

func (ok) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "garbage", Protocol: 1}, nil
}

func (ok) ValidateConfig(context.Context, json.RawMessage) ([]string, error) { return nil, nil }

func (ok) Check(context.Context, core.ProbeRequest) (core.ProbeResult, error) {
	return core.ProbeResult{Ready: true}, nil
}

func main() {
	fmt.Println("hello from a plugin that prints before its handshake \x00\xff")
	probe.Serve(ok{})
}
