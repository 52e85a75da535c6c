// Command stall is a probe plugin that never completes its handshake: it
// sleeps before serving (see package badprobes).
package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"
)

type ok struct{}

func (ok) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "stall", Protocol: 1}, nil
}

func (ok) ValidateConfig(context.Context, json.RawMessage) ([]string, error) { return nil, nil }

func (ok) Check(context.Context, core.ProbeRequest) (core.ProbeResult, error) {
	return core.ProbeResult{Ready: true}, nil
}

func main() {
	time.Sleep(time.Hour) // the host's start timeout must kill us
	probe.Serve(ok{})
}
