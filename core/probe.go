package core

import (
	"context"
	"encoding/json"
	"strings"
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
	// Internal is set when Port is only an internal HTTP port (no loopback
	// bind): the check runs through the runtime's helper (InternalProber).
	Internal bool `json:"internal,omitempty"`
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

// InternalProbe is a readiness check of a port that is only internal (R30,
// decision 18): it runs from a short-lived helper container on the
// container's own network, so the port is never published to probe it.
type InternalProbe struct {
	// Container is the exact ID of the probed container.
	Container string `json:"container"`
	// Type is "http" or "tcp"; Port the container port.
	Type string `json:"type"`
	Port int    `json:"port"`
	// Path and Host are the HTTP request's (Host empty: the dialled address).
	Path string `json:"path,omitempty"`
	Host string `json:"host,omitempty"`
	// Timeout is the whole readiness budget (R35).
	Timeout time.Duration `json:"timeout"`
}

// InternalProbeResult is how an internal probe ended: ready within the
// budget, or not (Detail is the last attempt's verdict).
type InternalProbeResult struct {
	Ready    bool   `json:"ready"`
	Attempts int    `json:"attempts"`
	Detail   string `json:"detail,omitempty"`
}

// InternalProber is implemented by runtimes that can run an internal probe
// (R30). ProbeInternal blocks until the helper ends; a budget that ran out
// is a result with Ready false, not an error. Errors: the container is gone
// (ErrNotFound), the helper cannot be built or run.
type InternalProber interface {
	ProbeInternal(ctx context.Context, p InternalProbe) (InternalProbeResult, error)
}

// ProbeDetailClosedAfterAccept is the text of the dedicated, matchable
// not-ready verdict of a TCP attempt whose connection reached end-of-stream
// right after accept (R32.6). Probe results cross the plugin wire as text,
// so the TCP probe puts this text in ProbeResult.Detail (plugins/probe/tcp
// exports the same text as ErrClosedAfterAccept); match it with
// IsClosedAfterAccept.
const ProbeDetailClosedAfterAccept = "connection closed right after accept"

// IsClosedAfterAccept reports whether a probe detail (or error text) is the
// R32.6 "connection closed right after accept" verdict.
func IsClosedAfterAccept(detail string) bool {
	return strings.Contains(detail, ProbeDetailClosedAfterAccept)
}
