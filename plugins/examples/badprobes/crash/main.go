// Command crash is a probe plugin that dies in its first Check (see
// package badprobes).
package main

import (
	"context"
	"encoding/json"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"
)

type crash struct{}

func (crash) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "crash", Protocol: 1}, nil
}

func (crash) ValidateConfig(context.Context, json.RawMessage) ([]string, error) { return nil, nil }

func (crash) Check(context.Context, core.ProbeRequest) (core.ProbeResult, error) {
	panic("badprobes/crash: deliberate crash in Check")
}

func main() { probe.Serve(crash{}) }
