// Command hang is a probe plugin whose Check never returns and ignores its
// context (see package badprobes).
package main

import (
	"context"
	"encoding/json"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"
)

type hang struct{}

func (hang) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "hang", Protocol: 1}, nil
}

func (hang) ValidateConfig(context.Context, json.RawMessage) ([]string, error) { return nil, nil }

func (hang) Check(context.Context, core.ProbeRequest) (core.ProbeResult, error) {
	select {} // never answers
}

func main() { probe.Serve(hang{}) }
