package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Protocol is the probe plugin protocol version this plugin speaks.
const Protocol = 1

// AttemptCap bounds one attempt when the engine sends no AttemptTimeout.
const AttemptCap = 5 * time.Second

// configSchema is the JSON schema Describe reports.
const configSchema = `{"type":"object","additionalProperties":false,"properties":{"service":{"type":"string","description":"grpc.health.v1 service name; empty = the server as a whole"}}}`

// Config is [services.<name>.readiness.config] of the grpc probe.
type Config struct {
	// Service is the grpc.health.v1 service name to check; "" (default)
	// asks about the server as a whole.
	Service string `json:"service"`
}

// Prober is the gRPC health readiness probe.
type Prober struct{}

var _ core.Prober = (*Prober)(nil)

// New returns the prober.
func New() *Prober { return &Prober{} }

// Describe returns name "grpc", protocol 1 and the config schema.
func (p *Prober) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "grpc", Protocol: Protocol, ConfigSchema: configSchema, Version: "1"}, nil
}

// ValidateConfig accepts an absent/null/{} config or {"service": "<string>"};
// it returns one message per problem: not an object, an unknown key (with
// the allowed keys), a service that is not a string.
func (p *Prober) ValidateConfig(_ context.Context, config json.RawMessage) ([]string, error) {
	_, problems := parseConfig(config)
	return problems, nil
}

// parseConfig decodes config strictly; problems are user-facing messages.
func parseConfig(config json.RawMessage) (Config, []string) {
	var c Config
	if len(bytes.TrimSpace(config)) == 0 || string(bytes.TrimSpace(config)) == "null" {
		return c, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(config, &m); err != nil {
		return c, []string{fmt.Sprintf("grpc probe: config must be a table (JSON object): %v", err)}
	}
	var problems []string
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "service":
			if err := json.Unmarshal(m[k], &c.Service); err != nil {
				problems = append(problems, fmt.Sprintf("grpc probe: config.service must be a string (the grpc.health.v1 service name), got %s", m[k]))
			}
		default:
			problems = append(problems, fmt.Sprintf("grpc probe: unknown config key %q: the only key is \"service\"", k))
		}
	}
	return c, problems
}

// Check makes ONE grpc.health.v1.Health/Check call to target.Address
// (plaintext HTTP/2, prior knowledge) bounded by req.AttemptTimeout (zero
// or above 5 s: 5 s) and ctx. Ready iff the answer is SERVING. Not ready is
// (ProbeResult{Ready:false, Detail}, nil), Detail being the status
// ("NOT_SERVING", "SERVICE_UNKNOWN") or the RPC error. The caller's context
// ending returns ctx's error as is (R32.3). An empty address (no loopback
// bind for readiness.port) or an invalid config wraps core.ErrInvalid.
func (p *Prober) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	if err := ctx.Err(); err != nil {
		return core.ProbeResult{}, err
	}
	t := req.Target
	if t.Address == "" {
		return core.ProbeResult{}, fmt.Errorf("%w: grpc probe of app %s service %s container %s: no loopback address (declare readiness.port as one of the service's HTTP or TCP ports)",
			core.ErrInvalid, t.App, t.Service, t.ContainerID)
	}
	cfg, problems := parseConfig(req.Config)
	if len(problems) > 0 {
		return core.ProbeResult{}, fmt.Errorf("%w: grpc probe of app %s service %s: %s", core.ErrInvalid, t.App, t.Service, strings.Join(problems, "; "))
	}
	timeout := req.AttemptTimeout
	if timeout <= 0 || timeout > AttemptCap {
		timeout = AttemptCap
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///"+t.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return core.ProbeResult{}, fmt.Errorf("%w: grpc probe: address %q: %w", core.ErrInvalid, t.Address, err)
	}
	defer conn.Close()
	r, err := healthpb.NewHealthClient(conn).Check(actx, &healthpb.HealthCheckRequest{Service: cfg.Service})
	if ctx.Err() != nil {
		return core.ProbeResult{}, ctx.Err()
	}
	what := fmt.Sprintf("grpc health %s", t.Address)
	if cfg.Service != "" {
		what += fmt.Sprintf(" service %q", cfg.Service)
	}
	if err != nil {
		if s, ok := status.FromError(err); ok {
			if s.Code() == codes.DeadlineExceeded {
				return core.ProbeResult{Detail: fmt.Sprintf("%s: no answer within %s", what, timeout)}, nil
			}
			return core.ProbeResult{Detail: fmt.Sprintf("%s: %s: %s", what, s.Code(), s.Message())}, nil
		}
		return core.ProbeResult{Detail: fmt.Sprintf("%s: %v", what, err)}, nil
	}
	st := r.GetStatus()
	return core.ProbeResult{Ready: st == healthpb.HealthCheckResponse_SERVING, Detail: fmt.Sprintf("%s: %s", what, st)}, nil
}
