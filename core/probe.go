package core

import (
	"context"
	"encoding/json"
	"time"
)

// Prober is one readiness backend (ARCHITECTURE §4 Probe). Check makes
// exactly ONE attempt; the engine owns the retry interval and the budget
// (SPEC R29–R35). Implemented by plugins/probe/{http,tcp,log}, custom
// plugins (through the gRPC client in plugins/sdk) and fakes.
type Prober interface {
	// Describe names the probe and validates nothing.
	Describe(ctx context.Context) (ProbeInfo, error)
	// ValidateConfig returns one message per problem in config (nil = ok).
	ValidateConfig(ctx context.Context, config json.RawMessage) ([]string, error)
	// Check makes one attempt against target. A not-ready result is
	// (ProbeResult{Ready:false, Detail:…}, nil); err is for the caller's
	// context ending (returned as is, R32.3) or a broken backend.
	Check(ctx context.Context, req ProbeRequest) (ProbeResult, error)
}

// ProbeInfo describes a probe backend.
type ProbeInfo struct {
	// Name is the probe type it serves ("http", "tcp", "log", or a plugin name).
	Name string `json:"name"`
	// Protocol is the plugin protocol version.
	Protocol int `json:"protocol"`
	// ConfigSchema is an optional JSON schema of Readiness.Config.
	ConfigSchema string `json:"config_schema,omitempty"`
	Version      string `json:"version,omitempty"`
}

// ProbeRequest is one attempt's input.
type ProbeRequest struct {
	Target ProbeTarget `json:"target"`
	// Readiness is the declared (or implicit) readiness of the service.
	Readiness Readiness `json:"readiness"`
	// Config is Readiness.Config as JSON, for custom plugins.
	Config json.RawMessage `json:"config,omitempty"`
	// AttemptTimeout bounds this attempt (R31: min(2 s, remaining)).
	AttemptTimeout time.Duration `json:"attempt_timeout,omitempty"`
}

// ProbeTarget is what a probe checks (ARCHITECTURE §4).
type ProbeTarget struct {
	App         string `json:"app"`
	Service     string `json:"service"`
	ContainerID string `json:"container_id"`
	// Address is "127.0.0.1:<host port>" of the probed port's loopback bind
	// (R30); empty when the service publishes no backend port.
	Address string `json:"address,omitempty"`
	// Port is the container port probed.
	Port int `json:"port,omitempty"`
	// StartedAt is the execution start time (R34: log probes scan since it).
	StartedAt time.Time `json:"started_at"`
	// Host is the HTTP Host header to send (decision 9).
	Host string `json:"host,omitempty"`
	// Interfaces of the service.
	HTTP []HTTPInterface `json:"http,omitempty"`
	TCP  []L4Interface   `json:"tcp,omitempty"`
	UDP  []L4Interface   `json:"udp,omitempty"`
}

// ProbeResult is one attempt's verdict.
type ProbeResult struct {
	Ready  bool   `json:"ready"`
	Detail string `json:"detail,omitempty"`
}

// ProbeSet resolves a readiness type (or plugin name) to a Prober.
type ProbeSet interface {
	// Prober returns the backend for kind ("http", "tcp", "log") or, for
	// kind "plugin", the custom plugin name. Unknown → ErrNotFound.
	Prober(ctx context.Context, kind, plugin string) (Prober, error)
}
