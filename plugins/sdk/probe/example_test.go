package probe_test

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"
)

// statusProbe is a custom readiness probe: ready when GET <config.path>
// on the service's loopback address answers 204.
type statusProbe struct{}

func (statusProbe) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "status204", ConfigSchema: `{"type":"object","properties":{"path":{"type":"string"}}}`}, nil
}

func (statusProbe) ValidateConfig(_ context.Context, config json.RawMessage) ([]string, error) {
	var c struct{ Path string }
	if err := json.Unmarshal(config, &c); err != nil || c.Path == "" {
		return []string{"path: required"}, nil
	}
	return nil, nil
}

func (statusProbe) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	var c struct{ Path string }
	_ = json.Unmarshal(req.Config, &c)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+req.Target.Address+c.Path, nil)
	if err != nil {
		return core.ProbeResult{Detail: err.Error()}, nil
	}
	resp, err := http.DefaultClient.Do(hreq)
	if ctx.Err() != nil {
		return core.ProbeResult{}, ctx.Err() // the caller's context ended (R32.3)
	}
	if err != nil {
		return core.ProbeResult{Detail: err.Error()}, nil
	}
	defer resp.Body.Close()
	return core.ProbeResult{Ready: resp.StatusCode == http.StatusNoContent, Detail: resp.Status}, nil
}

// A custom probe plugin is one page: build it as gordon-probe-status204 on
// the plugin path and declare readiness type = "plugin", plugin = "status204".
func ExampleServe() {
	probe.Serve(statusProbe{})
}
