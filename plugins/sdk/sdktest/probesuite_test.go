package sdktest_test

import (
	"context"
	"encoding/json"
	"net"
	"testing"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

// dialProbe is a minimal TCP connect probe used to exercise ProbeSuite.
type dialProbe struct{}

func (dialProbe) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "dial", Protocol: 1}, nil
}
func (dialProbe) ValidateConfig(context.Context, json.RawMessage) ([]string, error) { return nil, nil }
func (dialProbe) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", req.Target.Address)
	if ctx.Err() != nil {
		return core.ProbeResult{}, ctx.Err()
	}
	if err != nil {
		return core.ProbeResult{Detail: err.Error()}, nil
	}
	_ = c.Close()
	return core.ProbeResult{Ready: true}, nil
}

func TestProbeSuite_InProcess(t *testing.T) {
	sdktest.ProbeSuite(t, func(*testing.T) core.Prober { return dialProbe{} })
}

func TestProbeSuite_ThroughTheWire(t *testing.T) {
	sdktest.ProbeSuite(t, func(t *testing.T) core.Prober { return sdktest.ServeProbe(t, dialProbe{}) })
}
